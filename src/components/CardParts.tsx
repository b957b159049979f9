/**
 * Parts of a cluster card: the scheduler address (whose port is never cut
 * off), per-group worker counts, and how to release data that keeps adaptive
 * mode from shrinking.
 */
import * as React from 'react';

import { plural } from '../format';
import { IEvent, IWorkerGroupCounts } from '../types';
import { trans } from '../i18n';

/**
 * The address with its port kept whole: only the host part is shortened
 * with "…" when the card is narrow; the full address is in the tooltip.
 */
export function SchedulerAddress(props: {
  address: string | null;
  clusterName: string;
  /** The cluster has ended: no scheduler will come ("yet" would promise one). */
  ended?: boolean;
}): React.ReactElement {
  const { address } = props;
  const match = address ? /^(.*?)(:\d+)$/.exec(address) : null;
  return (
    <code
      className="cm-ClusterCard-address"
      aria-label={trans.__('Scheduler address of %1', props.clusterName)}
      title={address ?? undefined}
    >
      {match ? (
        <>
          <span className="cm-ClusterCard-addressHost">{match[1]}</span>
          <span className="cm-ClusterCard-addressPort">{match[2]}</span>
        </>
      ) : (
        <span className="cm-ClusterCard-addressHost">
          {address ??
            (props.ended
              ? trans.__('no scheduler')
              : trans.__('no scheduler yet'))}
        </span>
      )}
    </code>
  );
}

/**
 * "cpu 2/2 · gpu 0/1 (1 pending)": running of requested workers per group,
 * when there is more than one group.
 */
export function GroupCounts(props: {
  groups: ReadonlyArray<IWorkerGroupCounts>;
}): React.ReactElement | null {
  if (props.groups.length < 2) {
    return null;
  }
  return (
    <>
      <dt>{trans.__('Groups')}</dt>
      <dd className="cm-ClusterCard-groups">
        {props.groups.map((g, i) => (
          <React.Fragment key={g.name}>
            {i > 0 && ' · '}
            <span
              className="cm-ClusterCard-group"
              data-group={g.name}
              title={trans.__(
                '%1: %2 running of %3 requested, %4 pending',
                g.name,
                g.running,
                plural(g.requested, 'worker'),
                g.pending
              )}
            >
              {`${g.name} ${g.running}/${g.requested}`}
              {g.pending > 0 ? ` (${g.pending} pending)` : ''}
            </span>
          </React.Fragment>
        ))}
      </dd>
    </>
  );
}

/**
 * Whether a decision says that data a client holds keeps workers alive.
 */
export function blockedByClientData(decision: IEvent | null): boolean {
  return (
    !!decision &&
    decision.kind === 'note' &&
    /cannot shrink/i.test(decision.message) &&
    /client/i.test(decision.message)
  );
}

/**
 * How to let adaptive mode shrink when a client's data holds workers.
 */
export function ShrinkHint(): React.ReactElement {
  // The code stays as is; the sentence around it is translated whole, with
  // markers where the code goes (%1, %2, %3), which are then set as <code>.
  const code = [
    'del',
    'client.cancel(futures)',
    'client.unpublish_dataset(name)'
  ];
  const text = trans.__(
    'To let it shrink, release the data in the notebook that holds it: %1 the futures or persisted collections you no longer need, or call %2; published datasets stay until %3.',
    ...code.map((_, i) => `\uE000${i}\uE000`)
  );
  return (
    <div className="cm-ShrinkHint" role="note">
      {text
        .split(/\uE000(\d)\uE000/)
        .map((part, i) =>
          i % 2 ? <code key={i}>{code[Number(part)]}</code> : part
        )}
    </div>
  );
}
