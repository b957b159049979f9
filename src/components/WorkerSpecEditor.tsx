import {
  addIcon,
  Button,
  closeIcon,
  InputGroup
} from '@jupyterlab/ui-components';
import * as React from 'react';

import { ClusterManagerError } from '../request';
import {
  formatTotals,
  GroupField,
  groupProblems,
  IGroupDraft,
  newGroupDraft,
  perWorkerOfDraft,
  specTotals,
  totals
} from '../spec';
import { ILimits } from '../types';
import { checkCount, fieldLabel, stripField } from '../validate';
import { PlanPreview } from './AmountField';
import { FieldError, fieldMessage, invalidProps } from './FormDialog';
import { trans } from '../i18n';

/**
 * The columns of the table, with the request field each one fills.
 */
const columns = (): ReadonlyArray<{
  key: GroupField;
  label: string;
  hint: string;
}> => [
  { key: 'name', label: trans.__('Group'), hint: trans.__('Group name') },
  {
    key: 'count',
    label: trans.__('Workers'),
    hint: trans.__('Number of workers')
  },
  {
    key: 'threads',
    label: trans.__('Threads'),
    hint: trans.__('Threads (cores) per worker')
  },
  {
    key: 'memory',
    label: trans.__('Memory'),
    hint: trans.__('Memory per worker, e.g. 4 GiB')
  },
  { key: 'gpus', label: trans.__('GPUs'), hint: trans.__('GPUs per worker') }
];

export interface IWorkerSpecEditorProps {
  groups: IGroupDraft[];
  onChange: (groups: IGroupDraft[]) => void;
  /**
   * The last error of the server; shown next to the input it names.
   */
  error: ClusterManagerError | null;
  /**
   * The request field holding the spec (`spec`).
   */
  field: string;
  idPrefix: string;
  /**
   * For the total's warnings: the server's limits, and whether the workers
   * run on this machine (the backend's `runs_processes_here`).
   */
  limits?: ILimits | null;
  runsProcessesHere: boolean;
  /**
   * Whether the backend takes more than one group (`multiple_groups`).
   */
  multipleGroups: boolean;
  /**
   * Why threads, memory and GPUs cannot be changed (the backend's reason for
   * `editable_spec: false`): only the count can; null when they can.
   */
  shapeLocked?: string | null;
  /**
   * Why there can be only one group (the backend's reason), if it says.
   */
  singleGroupReason?: string | null;
}

/**
 * Whether the spec editor shows this error itself.
 */
export function specShowsError(
  error: ClusterManagerError | null,
  field: string
): boolean {
  return !!error?.field && error.field.startsWith(field);
}

/**
 * A table of worker groups (name, workers, threads, memory, GPUs) with
 * add/remove group, and what it all adds up to.
 */
export function WorkerSpecEditor(
  props: IWorkerSpecEditorProps
): React.ReactElement {
  const { groups, error, field, idPrefix } = props;

  const update = (index: number, key: GroupField, value: string) => {
    props.onChange(
      groups.map((g, i) => (i === index ? { ...g, [key]: value } : g))
    );
  };
  const remove = (index: number) =>
    props.onChange(groups.filter((_, i) => i !== index));
  const add = () => props.onChange([...groups, newGroupDraft(groups)]);

  const all = specTotals(groups);
  // Errors about the spec as a whole, or a group as a whole.
  const inputFields = new Set<string>();
  groups.forEach((_, i) =>
    columns().forEach(c => inputFields.add(`${field}.groups[${i}].${c.key}`))
  );
  // Named in the form's words: "Resource foo of group gpu: …".
  const otherError =
    specShowsError(error, field) && !inputFields.has(error!.field!)
      ? `${fieldLabel(
          error!.field!,
          groups.map(g => g.name)
        )}: ${stripField(error!.message, error!.field)}`
      : null;

  return (
    <div className="cm-SpecEditor">
      <table className="cm-SpecEditor-table">
        <thead>
          <tr>
            {columns().map(c => (
              <th key={c.key} scope="col" title={c.hint}>
                {c.label}
              </th>
            ))}
            <th scope="col">
              <span className="cm-VisuallyHidden">{trans.__('Remove')}</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {groups.map((group, i) => {
            const problems = groupProblems(group);
            const messageOf = (key: GroupField) =>
              problems[key] ??
              fieldMessage(error, `${field}.groups[${i}].${key}`);
            const messages = columns()
              .map(c => ({
                key: c.key,
                id: `${idPrefix}-g${i}-${c.key}-error`,
                message: messageOf(c.key)
              }))
              .filter(m => m.message);
            const perWorker = perWorkerOfDraft(group);
            const count = checkCount(group.count, 'workers').value;
            return (
              <React.Fragment key={i}>
                <tr className="cm-SpecEditor-group">
                  {columns().map(c => {
                    const id = `${idPrefix}-g${i}-${c.key}-error`;
                    const message = messageOf(c.key);
                    const locked = !!props.shapeLocked && c.key !== 'count';
                    return (
                      <td key={c.key}>
                        <InputGroup
                          className={`cm-SpecEditor-${c.key}`}
                          aria-label={trans.__('%1, group %2', c.hint, i + 1)}
                          title={locked ? props.shapeLocked! : c.hint}
                          disabled={locked}
                          value={group[c.key]}
                          inputMode={
                            c.key === 'name' || c.key === 'memory'
                              ? 'text'
                              : 'numeric'
                          }
                          onChange={e => update(i, c.key, e.target.value)}
                          {...invalidProps(id, message)}
                        />
                      </td>
                    );
                  })}
                  <td>
                    <Button
                      type="button"
                      className="jp-mod-styled cm-IconButton cm-SpecEditor-remove"
                      aria-label={trans.__(
                        'Remove group %1',
                        group.name || i + 1
                      )}
                      title={trans.__('Remove this group')}
                      disabled={groups.length <= 1}
                      onClick={() => remove(i)}
                    >
                      <closeIcon.react tag="span" />
                    </Button>
                  </td>
                </tr>
                <tr className="cm-SpecEditor-detail">
                  <td colSpan={columns().length + 1}>
                    {messages.map(m => (
                      <FieldError key={m.key} id={m.id} message={m.message} />
                    ))}
                    <span className="cm-Preview">
                      {perWorker && count !== null
                        ? formatTotals(totals(perWorker, count))
                        : ''}
                    </span>
                  </td>
                </tr>
              </React.Fragment>
            );
          })}
        </tbody>
      </table>
      <FieldError id={`${idPrefix}-spec-error`} message={otherError} />
      <div className="cm-SpecEditor-footer">
        <Button
          type="button"
          className="jp-mod-styled cm-SpecEditor-add"
          onClick={add}
          disabled={!props.multipleGroups}
          title={
            props.multipleGroups
              ? undefined
              : (props.singleGroupReason ??
                trans.__('This backend runs a single group of workers'))
          }
        >
          <addIcon.react tag="span" className="cm-ButtonIcon" />
          {trans.__('Add group')}
        </Button>
        <PlanPreview
          className="cm-SpecEditor-total"
          text={
            all && groups.length > 1
              ? trans.__('Total %1', formatTotals(all))
              : ''
          }
          planned={all}
          limits={{
            limits: props.limits ?? null,
            runsProcessesHere: props.runsProcessesHere
          }}
        />
      </div>
    </div>
  );
}
