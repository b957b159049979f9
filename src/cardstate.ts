/**
 * What a cluster's state allows: which actions work, why the others do not,
 * and what removing or restarting it is called. Pure: no DOM, no server.
 */
import { capabilitiesOf } from './capabilities';
import { ICluster } from './types';
import { trans } from './i18n';

/**
 * Whether a cluster has ended (failed, or stopped by itself) and only its
 * history, a restart and its removal are left.
 */
export function hasEnded(cluster: Pick<ICluster, 'status'>): boolean {
  return cluster.status === 'failed' || cluster.status === 'stopped';
}

/**
 * Why Scale, Adaptive mode and Worker Spec cannot be used now, or null when
 * they can.
 */
export function whyNotScalable(
  cluster: Pick<ICluster, 'status' | 'scheduler_address' | 'capabilities'>
): string | null {
  switch (cluster.status) {
    case 'failed':
      return trans.__('The cluster failed: restart it first');
    case 'stopped':
      return trans.__('The cluster has stopped: restart it first');
    case 'stopping':
      return trans.__('The cluster is stopping');
    default:
      break;
  }
  if (!capabilitiesOf(cluster).can_scale) {
    return trans.__('Started elsewhere: scale it where it was started');
  }
  if (!cluster.scheduler_address) {
    return trans.__('The scheduler has not started yet');
  }
  return null;
}

/**
 * Why a Client cell cannot be inserted for the cluster, or null when it can.
 */
export function whyNoClient(
  cluster: Pick<ICluster, 'status' | 'scheduler_address'>
): string | null {
  if (hasEnded(cluster) || cluster.status === 'stopping') {
    return trans.__(
      'The cluster is %1: there is no scheduler to connect to',
      cluster.status
    );
  }
  return cluster.scheduler_address
    ? null
    : trans.__('The scheduler has not started yet');
}

/**
 * Whether the server can start (or attach) the cluster again: it ended, and
 * it was not started in a notebook (a discovered cluster comes back when its
 * notebook starts it).
 */
export function canRestart(
  cluster: Pick<ICluster, 'status' | 'template'>
): boolean {
  return hasEnded(cluster) && cluster.template !== 'discovered';
}

/**
 * The name of the action that brings an ended cluster back.
 */
export function restartLabel(
  cluster: Pick<ICluster, 'capabilities'>
): 'Restart' | 'Attach again' {
  return capabilitiesOf(cluster).can_stop ? 'Restart' : 'Attach again';
}

/**
 * The name of the action that takes a cluster off the list: an ended one is
 * removed, one started elsewhere detached, any other shut down.
 */
export function removalLabel(
  cluster: Pick<ICluster, 'status' | 'capabilities'>
): 'Remove' | 'Detach' | 'Shut down' {
  if (hasEnded(cluster)) {
    return 'Remove';
  }
  return capabilitiesOf(cluster).can_stop ? 'Shut down' : 'Detach';
}

/**
 * The state a card shows. The server's status, except that a cluster whose
 * scheduler runs but whose every worker was refused (none running or
 * pending, a group saying why) is "refused": it cannot compute, so it is not
 * "running".
 */
export function shownStatus(
  cluster: Pick<ICluster, 'status' | 'workers'>
): string {
  const { status, workers } = cluster;
  const refused =
    (status === 'running' || status === 'scaling') &&
    workers.running === 0 &&
    workers.pending === 0 &&
    (workers.groups ?? []).some(g => !!g.error);
  return refused ? 'refused' : status;
}

/**
 * A status as the card's badge shows it (`shownStatus`), in the user's
 * language; the status itself (the API's word) stays the key.
 */
export function statusWord(status: string): string {
  const words: { [status: string]: string } = {
    pending: trans._p('cluster status', 'pending'),
    running: trans._p('cluster status', 'running'),
    scaling: trans._p('cluster status', 'scaling'),
    unresponsive: trans._p('cluster status', 'unresponsive'),
    stopping: trans._p('cluster status', 'stopping'),
    stopped: trans._p('cluster status', 'stopped'),
    failed: trans._p('cluster status', 'failed'),
    refused: trans._p('cluster status', 'refused')
  };
  return words[status] ?? status;
}

/**
 * A decision's reason without an error the card already shows above it
 * ("not retrying: sbatch: error …" becomes "not retrying"): said once.
 */
export function withoutShownError(
  message: string,
  shownErrors: ReadonlyArray<string | null | undefined>
): string {
  for (const error of shownErrors) {
    if (error && message !== error && message.endsWith(`: ${error}`)) {
      return message.slice(0, -(error.length + 2));
    }
  }
  return message;
}

/**
 * The words of a removal action (`removalLabel` names it in English).
 */
export function removalWords(action: string): string {
  switch (action) {
    case 'Remove':
      return trans.__('Remove');
    case 'Detach':
      return trans.__('Detach');
    default:
      return trans.__('Shut down');
  }
}

/**
 * The words of a restart ("Restart", or "Attach again" for an attached one).
 */
export function restartWords(cluster: Pick<ICluster, 'capabilities'>): string {
  return restartLabel(cluster) === 'Restart'
    ? trans.__('Restart')
    : trans.__('Attach again');
}
