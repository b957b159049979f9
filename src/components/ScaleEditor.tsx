import { HTMLSelect } from '@jupyterlab/ui-components';
import * as React from 'react';

import { capabilitiesOf } from '../capabilities';
import { otherGroupsTotals } from '../limits';
import { asServerError, ClusterManagerError } from '../request';
import { convertAmount, formatTotals, totals, workersFor } from '../spec';
import { AdaptUnit, ICluster, ILimits, IResolution, Target } from '../types';
import { checkAmount } from '../validate';
import { AmountField } from './AmountField';
import {
  FieldError,
  fieldMessage,
  FormError,
  invalidProps
} from './FormDialog';
import { trans } from '../i18n';

export interface IScaleEditorProps {
  cluster: ICluster;
  /**
   * The server's limits, for the preview's warnings (if known).
   */
  limits: ILimits | null;
  /**
   * Send the target; resolves with what the server resolved it to, throws
   * the server's error.
   */
  scale: (target: Target) => Promise<IResolution | undefined>;
  /**
   * Register the submit action of the enclosing form.
   */
  register: (submit: () => Promise<IResolution | null>) => void;
}

/**
 * Scale one group in workers, cores or memory, with a live preview of the
 * whole workers it resolves to: "→ 4 workers · 8 cores · 16 GiB". Switching
 * the unit converts the amount; a value that does not read says why (and is
 * not sent); the preview warns above the server's and the machine's limits.
 */
export function ScaleEditor(props: IScaleEditorProps): React.ReactElement {
  const { cluster, limits } = props;
  const [error, setError] = React.useState<ClusterManagerError | null>(null);
  const groups = cluster.spec.groups;
  const [groupName, setGroupName] = React.useState(groups[0]?.name ?? '');
  const [unit, setUnit] = React.useState<AdaptUnit>('workers');
  const group = groups.find(g => g.name === groupName) ?? groups[0];
  const [amount, setAmount] = React.useState(String(group?.count ?? 0));

  const checked = checkAmount(unit, amount);
  const planned =
    group && checked.value !== null
      ? totals(group, workersFor(group, unit, checked.value))
      : null;
  const adaptive = cluster.adapt?.groups.some(g => g.group === group?.name);

  props.register(async () => {
    if (checked.error) {
      // The preview already says what is wrong.
      return null;
    }
    // Sizes go as typed (the server reads them); counts as numbers.
    const value = unit === 'memory' ? amount.trim() : checked.value;
    const target = { [unit]: value, group: group?.name } as Target;
    try {
      return (await props.scale(target)) ?? null;
    } catch (e) {
      setError(asServerError(e));
      return null;
    }
  });

  const amountField = `scale.${unit}`;
  const serverMessage = fieldMessage(error, amountField);
  const groupMessage = fieldMessage(error, 'scale.group');
  const edit = (change: () => void) => {
    change();
    setError(null);
  };

  return (
    <div className="cm-ScaleEditor">
      <FormError
        error={error}
        shownInline={!!(serverMessage || groupMessage)}
        groupNames={groups.map(g => g.name)}
      />
      {groups.length > 1 && (
        <label className="cm-Field">
          <span className="cm-Field-label">{trans.__('Group')}</span>
          <HTMLSelect
            className="cm-ScaleEditor-group"
            value={group?.name}
            onChange={e =>
              edit(() => {
                setGroupName(e.target.value);
                const g = groups.find(x => x.name === e.target.value);
                setUnit('workers');
                setAmount(String(g?.count ?? 0));
              })
            }
            {...invalidProps('cm-scale-group-error', groupMessage)}
          >
            {groups.map(g => (
              <option key={g.name} value={g.name}>
                {g.name}
              </option>
            ))}
          </HTMLSelect>
          <FieldError id="cm-scale-group-error" message={groupMessage} />
        </label>
      )}
      <AmountField
        label={trans.__('Scale to')}
        inputs={[
          {
            id: 'cm-scale-amount',
            className: 'cm-ScaleEditor-amount',
            value: amount,
            onChange: text => edit(() => setAmount(text)),
            placeholder: unit === 'memory' ? 'e.g. 16 GiB' : 'e.g. 4',
            message: checked.error ? null : serverMessage,
            unreadable: checked.error,
            errorId: 'cm-scale-amount-error'
          }
        ]}
        unit={unit}
        onUnitChange={next =>
          edit(() => {
            setAmount(convertAmount(group ?? null, unit, next, amount));
            setUnit(next);
          })
        }
        unitClassName="cm-ScaleEditor-unit"
        preview={{
          className: 'cm-ScaleEditor-preview',
          text: planned ? formatTotals(planned) : '',
          planned,
          limits: {
            limits,
            others: otherGroupsTotals(groups, group?.name),
            runsProcessesHere: capabilitiesOf(cluster).runs_processes_here
          }
        }}
      />
      {adaptive && (
        <p className="cm-Form-note">
          {trans.__(
            'Adaptive mode is on for this group; scaling by hand turns it off.'
          )}
        </p>
      )}
    </div>
  );
}
