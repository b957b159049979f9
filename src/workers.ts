/**
 * How a worker of the card's Workers list reads. Pure: no DOM.
 */
import { formatSize } from './format';
import { trans } from './i18n';
import { IWorkerInfo } from './types';

/**
 * "310 MiB of 512 MiB", "512 MiB limit", or "" when neither is known.
 */
export function workerMemoryText(worker: IWorkerInfo): string {
  const used = worker.memory;
  const limit = worker.memory_limit;
  if (used !== null && limit !== null) {
    return trans.__('%1 of %2', formatSize(used), formatSize(limit));
  }
  if (limit !== null) {
    return trans.__('%1 limit', formatSize(limit));
  }
  return used !== null ? formatSize(used) : '';
}
