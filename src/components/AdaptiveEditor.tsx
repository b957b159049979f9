import * as React from 'react';

import { capabilitiesOf } from '../capabilities';
import { editableSize, formatCores, formatSize, plural } from '../format';
import { otherGroupsTotals } from '../limits';
import { asServerError, ClusterManagerError } from '../request';
import {
  convertAmount,
  IPerWorker,
  ITotals,
  parseAmount,
  totals,
  workersFor
} from '../spec';
import {
  AdaptUnit,
  IAdaptRange,
  IAdaptRequest,
  ICluster,
  ILimits,
  PatchClusterRequest
} from '../types';
import { checkAmount } from '../validate';
import { AmountField } from './AmountField';
import { fieldMessage, FormError } from './FormDialog';
import { trans } from '../i18n';

/**
 * Adaptive mode of one group, as typed.
 */
export interface IAdaptDraft {
  on: boolean;
  unit: AdaptUnit;
  minimum: string;
  maximum: string;
}

const OFF: IAdaptDraft = {
  on: false,
  unit: 'workers',
  minimum: '0',
  maximum: '4'
};

function amountText(unit: AdaptUnit, value: number | string): string {
  return unit === 'memory' && typeof value === 'number'
    ? editableSize(value)
    : String(value);
}

/**
 * The draft for a range the server reports (or a template's adapt).
 */
export function adaptDraft(
  range: IAdaptRange | IAdaptRequest | null | undefined
): IAdaptDraft {
  if (!range) {
    return { ...OFF };
  }
  const unit = range.unit ?? 'workers';
  return {
    on: true,
    unit,
    minimum: amountText(unit, range.minimum),
    maximum: amountText(unit, range.maximum)
  };
}

/**
 * The request for a draft; amounts are sent as typed when they do not
 * parse, so that the server says what is wrong with them.
 */
export function adaptRequest(
  draft: IAdaptDraft,
  group?: string
): IAdaptRequest {
  const value = (text: string) =>
    draft.unit === 'memory'
      ? text.trim()
      : (parseAmount('workers', text) ?? text);
  return {
    ...(group ? { group } : {}),
    minimum: value(draft.minimum),
    maximum: value(draft.maximum),
    unit: draft.unit
  };
}

/**
 * What is wrong with a range as typed, per end; `null` when it reads.
 */
export function rangeProblems(draft: IAdaptDraft): {
  minimum: string | null;
  maximum: string | null;
} {
  const min = checkAmount(draft.unit, draft.minimum);
  const max = checkAmount(draft.unit, draft.maximum);
  let maximum = max.error;
  if (
    !maximum &&
    min.value !== null &&
    max.value !== null &&
    max.value < min.value
  ) {
    maximum = trans.__('Must be at least the minimum');
  }
  return { minimum: min.error, maximum };
}

/**
 * The workers each end of a range means, when both read.
 */
function rangeTotals(
  draft: IAdaptDraft,
  perWorker: IPerWorker | null
): [ITotals, ITotals] | null {
  const min = parseAmount(draft.unit, draft.minimum);
  const max = parseAmount(draft.unit, draft.maximum);
  if (!perWorker || min === null || max === null) {
    return null;
  }
  return [
    totals(perWorker, workersFor(perWorker, draft.unit, min)),
    totals(perWorker, workersFor(perWorker, draft.unit, max))
  ];
}

/**
 * "→ 0–4 workers · 0–8 cores · 0–16 GiB" for a range of a group; a range of
 * one size reads as that size ("→ 1 worker · 1 core · 1 GiB").
 */
function rangePreview([lo, hi]: [ITotals, ITotals]): string {
  if (lo.workers === hi.workers) {
    return (
      `→ ${plural(hi.workers, 'worker')} · ${plural(hi.cores, 'core')} · ` +
      formatSize(hi.memory)
    );
  }
  return trans.__(
    '→ %1–%2 workers · %3–%4 cores · %5–%6',
    lo.workers,
    hi.workers,
    formatCores(lo.cores),
    formatCores(hi.cores),
    formatSize(lo.memory),
    formatSize(hi.memory)
  );
}

export interface IAdaptRangeFieldsProps {
  label: string;
  draft: IAdaptDraft;
  onChange: (draft: IAdaptDraft) => void;
  perWorker: IPerWorker | null;
  /**
   * The server's error, when it is about this group's range.
   */
  error: ClusterManagerError | null;
  /**
   * The request field holding the range (`adapt`).
   */
  field: string;
  idPrefix: string;
  /**
   * For the preview's warnings: the server's limits, what the other groups
   * add up to, and whether the workers run on this machine (the backend's
   * `runs_processes_here`).
   */
  limits?: ILimits | null;
  others?: ITotals;
  runsProcessesHere: boolean;
}

/**
 * On/off, unit, minimum and maximum of adaptive mode for one group.
 * Switching the unit converts both ends.
 */
export function AdaptRangeFields(
  props: IAdaptRangeFieldsProps
): React.ReactElement {
  const { draft, error, field, idPrefix, label } = props;
  const set = (change: Partial<IAdaptDraft>) =>
    props.onChange({ ...draft, ...change });
  const problems = rangeProblems(draft);
  const minMessage =
    problems.minimum ?? fieldMessage(error, `${field}.minimum`);
  const maxMessage =
    problems.maximum ?? fieldMessage(error, `${field}.maximum`);
  const unitMessage = fieldMessage(error, `${field}.unit`);
  const range = rangeTotals(draft, props.perWorker);
  const switchUnit = (unit: AdaptUnit) => {
    const convert = (text: string) =>
      convertAmount(props.perWorker, draft.unit, unit, text);
    set({
      unit,
      minimum: convert(draft.minimum),
      maximum: convert(draft.maximum)
    });
  };
  return (
    <fieldset className="cm-AdaptRange" data-group={label}>
      <legend>
        <label className="cm-Checkbox">
          <input
            type="checkbox"
            className="jp-mod-styled cm-AdaptRange-on"
            checked={draft.on}
            onChange={e => set({ on: e.target.checked })}
          />
          {trans.__('Adaptive')}{' '}
          <span className="cm-AdaptRange-group">{label}</span>
        </label>
      </legend>
      {draft.on && (
        <AmountField
          inputs={[
            {
              label: trans.__('Minimum'),
              className: 'cm-AdaptRange-minimum',
              value: draft.minimum,
              onChange: minimum => set({ minimum }),
              message: minMessage,
              errorId: `${idPrefix}-min-error`
            },
            {
              label: trans.__('Maximum'),
              className: 'cm-AdaptRange-maximum',
              value: draft.maximum,
              onChange: maximum => set({ maximum }),
              message: maxMessage,
              errorId: `${idPrefix}-max-error`
            }
          ]}
          unit={draft.unit}
          onUnitChange={switchUnit}
          unitClassName="cm-AdaptRange-unit"
          unitMessage={unitMessage}
          unitErrorId={`${idPrefix}-unit-error`}
          preview={{
            className: 'cm-AdaptRange-preview',
            text: range ? rangePreview(range) : '',
            // The most it may grow to is what the limits are about.
            planned: range ? range[1] : null,
            limits: {
              limits: props.limits ?? null,
              others: props.others,
              runsProcessesHere: props.runsProcessesHere
            }
          }}
        />
      )}
    </fieldset>
  );
}

export interface IAdaptiveEditorProps {
  cluster: ICluster;
  /**
   * The server's limits, for the previews' warnings (if known).
   */
  limits: ILimits | null;
  /**
   * Send one change; throws the server's error.
   */
  patch: (request: PatchClusterRequest) => Promise<unknown>;
  /**
   * Register the submit action of the enclosing form.
   */
  register: (submit: () => Promise<boolean | null>) => void;
}

/**
 * Adaptive mode per group of a running cluster. Applying sends one PATCH
 * per changed group: a range turns it on (other groups keep theirs);
 * `{"adapt": {"group", "enabled": false}}` turns one group off, at the
 * size it has.
 */
export function AdaptiveEditor(
  props: IAdaptiveEditorProps
): React.ReactElement {
  const { cluster } = props;
  const groups = cluster.spec.groups;
  const initial = React.useMemo(() => {
    const drafts: { [group: string]: IAdaptDraft } = {};
    for (const g of groups) {
      drafts[g.name] = adaptDraft(
        cluster.adapt?.groups.find(r => r.group === g.name)
      );
    }
    return drafts;
  }, []);
  const [drafts, setDrafts] = React.useState(initial);
  const [error, setError] = React.useState<ClusterManagerError | null>(null);
  const [errorGroup, setErrorGroup] = React.useState<string | null>(null);

  props.register(async () => {
    const changed = groups.filter(
      g => JSON.stringify(drafts[g.name]) !== JSON.stringify(initial[g.name])
    );
    const turnOn = changed.filter(g => drafts[g.name].on);
    const unreadable = turnOn.some(g => {
      const problems = rangeProblems(drafts[g.name]);
      return problems.minimum || problems.maximum;
    });
    if (unreadable) {
      // The fields already say what is wrong.
      return null;
    }
    const turnOff = changed.filter(g => !drafts[g.name].on);
    const requests: Array<[string, PatchClusterRequest]> = [];
    for (const g of turnOn) {
      requests.push([g.name, { adapt: adaptRequest(drafts[g.name], g.name) }]);
    }
    for (const g of turnOff) {
      requests.push([g.name, { adapt: { group: g.name, enabled: false } }]);
    }
    for (const [group, request] of requests) {
      try {
        await props.patch(request);
      } catch (e) {
        setErrorGroup(group);
        setError(asServerError(e));
        return null;
      }
    }
    return true;
  });

  const inline =
    !!error?.field &&
    /^adapt\.(minimum|maximum|unit)$/.test(error.field) &&
    errorGroup !== null;

  return (
    <div className="cm-AdaptiveEditor">
      <FormError
        error={error}
        shownInline={inline}
        groupNames={groups.map(g => g.name)}
      />
      {groups.map((g, i) => (
        <AdaptRangeFields
          key={g.name}
          label={g.name}
          draft={drafts[g.name]}
          onChange={d => {
            setDrafts({ ...drafts, [g.name]: d });
            setError(null);
          }}
          perWorker={g}
          limits={props.limits}
          others={otherGroupsTotals(groups, g.name)}
          runsProcessesHere={capabilitiesOf(cluster).runs_processes_here}
          error={errorGroup === g.name ? error : null}
          field="adapt"
          idPrefix={`cm-adapt-${i}`}
        />
      ))}
      {cluster.adapt && (
        <p className="cm-Form-note">
          {trans._n(
            'Decides every %2 s; shrinks after %1 low interval.',
            'Decides every %2 s; shrinks after %1 low intervals.',
            cluster.adapt.wait_count,
            cluster.adapt.interval
          )}
        </p>
      )}
    </div>
  );
}
