/**
 * Attaching a cluster started elsewhere: whether the server reached its
 * scheduler, and the reason in words when it did not. Pure: no DOM, no server.
 */
import { ICluster } from './types';
import { trans } from './i18n';

/**
 * Where an attach stands: still reaching the scheduler, attached, or failed
 * with the server's reason.
 */
export type AttachOutcome =
  | { state: 'waiting' }
  | { state: 'attached' }
  | { state: 'failed'; reason: string };

/**
 * The outcome of an attach, from the listed cluster (undefined: not listed,
 * i.e. removed meanwhile).
 */
export function attachOutcome(cluster: ICluster | undefined): AttachOutcome {
  if (!cluster) {
    return {
      state: 'failed',
      reason: trans.__('The cluster left the list')
    };
  }
  switch (cluster.status) {
    case 'pending':
      return { state: 'waiting' };
    case 'failed':
    case 'stopped':
    case 'stopping':
      return { state: 'failed', reason: attachFailure(cluster.error) };
    default:
      return { state: 'attached' };
  }
}

/**
 * The server's reason for a failed attach, never ending in a bare colon.
 */
export function attachFailure(error: string | null): string {
  const reason = (error ?? '').trim().replace(/:$/, '').trim();
  return reason
    ? capitalize(reason)
    : trans.__('The scheduler could not be reached');
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
