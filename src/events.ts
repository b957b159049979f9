/**
 * How an event reads on the card and in History: what was asked, what it
 * became, how many times a note came in a row, and whether it is a warning.
 * Pure: no DOM.
 */
import { formatSize, plural } from './format';
import { trans } from './i18n';
import { ICluster, IEvent } from './types';

/**
 * What a change asked and what it became:
 * "4 GiB → 4 workers × 1 GiB (from 2)", "2 → 4 workers",
 * "4 workers, unchanged", or what was asked alone ("3 cores").
 *
 * `perWorkerMemory`: the memory of one worker of the event's group, when
 * known: with what was asked, it says what the workers add up to.
 */
export function eventChange(
  event: IEvent,
  perWorkerMemory: number | null = null
): string {
  const asked = event.asked?.trim() || null;
  if (event.before === null || event.after === null) {
    return asked ?? '';
  }
  const workers = plural(event.after, 'worker');
  const each = perWorkerMemory
    ? trans.__('%1 × %2', workers, formatSize(perWorkerMemory))
    : workers;
  if (asked) {
    // Same count: still news (e.g. a spec edit that replaced them).
    return event.before === event.after
      ? trans.__('%1 → %2', asked, each)
      : trans.__('%1 → %2 (from %3)', asked, each, event.before);
  }
  if (event.before === event.after) {
    return trans.__('%1, unchanged', workers);
  }
  return `${event.before} → ${workers}`;
}

/**
 * " ×3" for a note that came three times in a row, else "".
 */
export function repeatText(event: IEvent): string {
  const count = event.count ?? 1;
  return count > 1 ? ` ×${count}` : '';
}

/**
 * Whether the event is one a user must act on (the warning colour).
 */
export function isWarning(event: IEvent): boolean {
  return event.level === 'warning';
}

/**
 * The memory of one worker of group `group` of the cluster's spec, if any.
 */
export function groupMemory(
  cluster: ICluster,
  group: string | null | undefined
): number | null {
  const groups = cluster.spec?.groups ?? [];
  const found = group
    ? groups.find(g => g.name === group)
    : groups.length === 1
      ? groups[0]
      : undefined;
  return found?.memory ?? null;
}
