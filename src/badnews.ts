/**
 * Bad news about clusters, worded for a notification: what went wrong, in
 * the server's words. Pure: the notifier (notifications.ts) shows them.
 */
import { ICluster, IEvent } from './types';
import { trans } from './i18n';

/**
 * One piece of bad news about one cluster.
 */
export interface IBadNews {
  clusterId: string;
  /** What the notification says (the cluster's name, then the server's reason). */
  message: string;
  /** `error` when the cluster cannot work, `warning` when it carries on. */
  level: 'error' | 'warning';
}

/**
 * The statuses in which a cluster cannot do what it was asked.
 */
const BROKEN = new Set(['failed', 'unresponsive']);

/**
 * What the server said went wrong between two states of a cluster: every
 * event with a `cause` (a worker killed, a job that ended on a node
 * failure...), a new cluster error (failed, unresponsive, could not start)
 * and a new error of one of its groups (e.g. its jobs refused).
 *
 * Nothing is bad news about a cluster seen for the first time (`before`
 * undefined) but its events: a page load does not repeat old news.
 */
export function badNews(
  before: ICluster | undefined,
  after: ICluster,
  events: ReadonlyArray<IEvent> = []
): IBadNews[] {
  const news: IBadNews[] = [];
  const say = (text: string, level: IBadNews['level']) => {
    const message = `${after.name}: ${text}`;
    if (!news.some(n => n.message === message)) {
      news.push({ clusterId: after.id, message, level });
    }
  };
  for (const event of events) {
    if (event.cause) {
      const detail = event.cause.detail?.trim();
      say(
        detail && !event.message.includes(detail)
          ? `${event.message} (${detail})`
          : event.message,
        'warning'
      );
    }
  }
  if (!before) {
    return news;
  }
  const broken = BROKEN.has(after.status);
  if (after.error && after.error !== before.error) {
    say(after.error, broken ? 'error' : 'warning');
  } else if (broken && after.status !== before.status) {
    say(trans.__('the cluster is %1', after.status), 'error');
  }
  const previous = new Map(
    before.workers.groups.map(g => [g.name, g.error ?? null])
  );
  for (const group of after.workers.groups) {
    if (
      group.error &&
      group.error !== after.error &&
      group.error !== previous.get(group.name)
    ) {
      say(trans.__('group %1: %2', group.name, group.error), 'error');
    }
  }
  return news;
}

/**
 * The news about clusters that left the list unannounced (noticed in a
 * fresh snapshot): those this server ran are gone with their workers; those
 * started elsewhere may still run where they were started.
 */
export function goneNews(
  gone: ReadonlyArray<Pick<ICluster, 'id' | 'name' | 'capabilities'>>
): IBadNews[] {
  return gone.map(cluster => ({
    clusterId: cluster.id,
    message:
      cluster.capabilities && !cluster.capabilities.can_stop
        ? trans.__(
            '%1 is no longer listed; it was started elsewhere and may still run there',
            cluster.name
          )
        : trans.__(
            '%1 is gone: it stopped while the sidebar could not see it',
            cluster.name
          ),
    level: 'warning'
  }));
}
