/**
 * The numbers of a cluster card: workers running and pending (per group),
 * resources, user options, adaptive range, and the last scaling decision.
 */
import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

import { withoutShownError } from '../cardstate';
import { formatSize, formatTime, plural } from '../format';
import { IAdaptRange, ICluster, IEvent } from '../types';
import { blockedByClientData, GroupCounts, ShrinkHint } from './CardParts';
import { UsageText } from './ClusterChart';
import { formatOptions } from './UserOptionsFields';
import { eventChange, isWarning, repeatText } from '../events';
import { trans } from '../i18n';

/**
 * "2 pending — Resources", or "2 pending — 1 Resources, 1 Priority".
 */
export function pendingText(
  pending: number,
  reasons: { [reason: string]: number } | undefined
): string {
  const entries = Object.entries(reasons ?? {});
  if (!pending || !entries.length) {
    return trans.__('%1 pending', pending);
  }
  const why =
    entries.length === 1
      ? entries[0][0]
      : entries.map(([reason, n]) => `${n} ${reason}`).join(', ');
  return trans.__('%1 pending — %2', pending, why);
}

function rangeText(range: IAdaptRange): string {
  if (range.unit === 'memory') {
    return `${range.group} ${formatSize(range.minimum)}–${formatSize(range.maximum)}`;
  }
  return range.unit === 'cores'
    ? trans.__('%1 %2–%3 cores', range.group, range.minimum, range.maximum)
    : trans.__('%1 %2–%3 workers', range.group, range.minimum, range.maximum);
}

/**
 * "4 GiB → 4 workers × 1 GiB (from 2) (default)", for a scaling decision:
 * what was asked, then what it became.
 */
function decisionChange(event: IEvent, perWorkerMemory: number | null): string {
  const group = event.group ? ` (${event.group})` : '';
  if (!event.asked && event.before !== null && event.before === event.after) {
    return trans.__('%1%2, unchanged:', plural(event.after, 'worker'), group);
  }
  const change = eventChange(event, perWorkerMemory);
  return change ? `${change}${group}` : '';
}

/**
 * Workers, groups, resources, options and adaptive state, as a list.
 */
export function CardDetails(props: { cluster: ICluster }): React.ReactElement {
  const { cluster } = props;
  const { workers, resources } = cluster;
  return (
    <dl className="cm-ClusterCard-details">
      <dt>{trans.__('Workers')}</dt>
      <dd
        className="cm-ClusterCard-workers"
        aria-label={trans.__(
          'Workers: %1 running, %2',
          workers.running,
          pendingText(workers.pending, workers.pending_reasons)
        )}
      >
        <span className="cm-ClusterCard-workersRunning">{workers.running}</span>{' '}
        {trans.__('running,')}{' '}
        <span
          className="cm-ClusterCard-workersPending"
          title={(workers.waiting ?? [])
            .map(w =>
              trans.__('%1: job %2 %3', w.name, w.job_id ?? '?', w.reason)
            )
            .join('\n')}
        >
          {pendingText(workers.pending, workers.pending_reasons)}
        </span>
      </dd>
      <GroupCounts groups={workers.groups ?? []} />
      <dt>{trans.__('Resources')}</dt>
      <dd className="cm-ClusterCard-resources">
        <span className="cm-ClusterCard-cores">
          {plural(resources.cores, 'core')}
        </span>{' '}
        ·{' '}
        <span className="cm-ClusterCard-memory">
          {formatSize(resources.memory)}
        </span>{' '}
        ·{' '}
        <span className="cm-ClusterCard-gpus">
          {plural(resources.gpus, 'GPU')}
        </span>
      </dd>
      {cluster.usage && (
        <>
          <dt>{trans.__('Used')}</dt>
          <dd>
            <UsageText usage={cluster.usage} />
          </dd>
        </>
      )}
      {Object.keys(cluster.options ?? {}).length > 0 && (
        <>
          <dt>{trans.__('Options')}</dt>
          <dd className="cm-ClusterCard-options">
            {formatOptions(cluster.options)}
          </dd>
        </>
      )}
      <dt>{trans.__('Adaptive')}</dt>
      <dd className="cm-ClusterCard-adapt" data-adaptive={!!cluster.adapt}>
        {cluster.adapt
          ? trans.__('on · %1', cluster.adapt.groups.map(rangeText).join(', '))
          : 'off'}
      </dd>
    </dl>
  );
}

/**
 * The last scaling decision with its reason, and how to let adaptive mode
 * shrink when a client's data holds workers.
 */
/**
 * Why a worker last went away on its own (from `last_departure`); its log
 * opens from here.
 */
export function CardDeparture(props: {
  departure: IEvent | null | undefined;
  onOpenLog: (worker: string) => void;
}): React.ReactElement | null {
  const cause = props.departure?.cause;
  if (!props.departure || !cause) {
    return null;
  }
  return (
    <div
      className="cm-ClusterCard-departure"
      aria-label={trans.__('Why a worker last went away')}
      data-cause-kind={cause.kind}
    >
      <span className="cm-ClusterCard-departureKind">{cause.kind}</span>{' '}
      <span className="cm-ClusterCard-departureText">
        {cause.worker}: {cause.detail}
      </span>{' '}
      <span className="cm-ClusterCard-decisionMeta">
        {formatTime(props.departure.time)}
      </span>{' '}
      <Button
        type="button"
        className="cm-ClusterCard-departureLog"
        title={trans.__('Open the log of %1', cause.worker)}
        onClick={() => props.onOpenLog(cause.worker)}
      >
        {trans.__('log')}
      </Button>
    </div>
  );
}

export function CardDecision(props: {
  decision: IEvent | null;
  /** Errors the card shows already: the reason does not repeat them. */
  shownErrors?: ReadonlyArray<string | null>;
  /** The memory of one worker of the decision's group, when known. */
  perWorkerMemory?: number | null;
}): React.ReactElement | null {
  const { decision } = props;
  if (!decision) {
    return null;
  }
  const reason = withoutShownError(decision.message, props.shownErrors ?? []);
  return (
    <>
      <div
        className="cm-ClusterCard-decision"
        aria-label={trans.__('Last decision')}
        data-level={isWarning(decision) ? 'warning' : 'info'}
      >
        <span className="cm-ClusterCard-decisionChange">
          {decisionChange(decision, props.perWorkerMemory ?? null)}
        </span>{' '}
        <span className="cm-ClusterCard-decisionReason">
          {reason}
          {repeatText(decision)}
        </span>{' '}
        <span className="cm-ClusterCard-decisionMeta">
          {[
            // "manual scale · manual" says it twice
            decision.source &&
            !decision.message.toLowerCase().includes(decision.source)
              ? decision.source
              : null,
            formatTime(decision.time)
          ]
            .filter(Boolean)
            .join(' · ')}
        </span>
      </div>
      {blockedByClientData(decision) && <ShrinkHint />}
    </>
  );
}
