/**
 * Worker Specs as the editors handle them: text drafts of worker groups,
 * their requests, and the client-side preview of what a target resolves to
 * (the server resolves the same way: round up to whole workers).
 */
import {
  exactSize,
  formatCores,
  formatSize,
  parseCount,
  parseSize
} from './format';
import {
  AdaptUnit,
  IWorkerGroupRequest,
  IWorkerGroupSpec,
  IWorkerSpecRequest
} from './types';

/**
 * A worker group as typed in the editor.
 */
export interface IGroupDraft {
  name: string;
  count: string;
  threads: string;
  memory: string;
  gpus: string;
}

/**
 * What some workers of one group add up to.
 */
export interface ITotals {
  workers: number;
  cores: number;
  memory: number;
  gpus: number;
}

export function draftFromGroup(group: IWorkerGroupSpec): IGroupDraft {
  return {
    name: group.name,
    count: String(group.count),
    threads: String(group.threads),
    memory: exactSize(group.memory),
    gpus: String(group.gpus)
  };
}

/**
 * A new group for the editor: like the last one, with a free name.
 */
export function newGroupDraft(groups: IGroupDraft[]): IGroupDraft {
  const last = groups[groups.length - 1];
  const names = new Set(groups.map(g => g.name));
  let n = groups.length + 1;
  while (names.has(`group-${n}`)) {
    n += 1;
  }
  return {
    name: `group-${n}`,
    count: '1',
    threads: last?.threads ?? '1',
    memory: last?.memory ?? '1 GiB',
    gpus: '0'
  };
}

/**
 * The request for a draft. Numbers that do not parse are sent as typed, so
 * the server explains what is wrong with them next to the field.
 */
export function groupRequest(draft: IGroupDraft): IWorkerGroupRequest {
  const asNumber = (text: string) => {
    const value = parseCount(text);
    return (value ?? text) as number;
  };
  return {
    name: draft.name.trim(),
    count: asNumber(draft.count),
    threads: asNumber(draft.threads),
    memory: draft.memory.trim(),
    gpus: asNumber(draft.gpus)
  };
}

export function specRequest(groups: IGroupDraft[]): IWorkerSpecRequest {
  return { groups: groups.map(groupRequest) };
}

/**
 * Per-worker threads, memory and GPUs of a group (draft or spec), if known.
 */
export interface IPerWorker {
  threads: number;
  memory: number;
  gpus: number;
}

export function perWorkerOfDraft(draft: IGroupDraft): IPerWorker | null {
  const threads = parseCount(draft.threads);
  const memory = parseSize(draft.memory);
  const gpus = parseCount(draft.gpus);
  if (!threads || !memory || gpus === null) {
    return null;
  }
  return { threads, memory, gpus };
}

/**
 * Whole workers of a group that provide `amount` of `unit`, rounding up.
 */
export function workersFor(
  perWorker: IPerWorker,
  unit: AdaptUnit,
  amount: number
): number {
  if (unit === 'workers') {
    return Math.ceil(amount);
  }
  const each = unit === 'cores' ? perWorker.threads : perWorker.memory;
  return Math.ceil(amount / each);
}

export function totals(perWorker: IPerWorker, workers: number): ITotals {
  return {
    workers,
    cores: workers * perWorker.threads,
    memory: workers * perWorker.memory,
    gpus: workers * perWorker.gpus
  };
}

/**
 * The amount typed for a unit: a count, or a size for memory.
 */
export function parseAmount(unit: AdaptUnit, text: string): number | null {
  return unit === 'memory' ? parseSize(text) : parseCount(text);
}

/**
 * "→ 4 workers · 8 cores · 16 GiB" (and GPUs when there are any).
 */
export function formatTotals(t: ITotals): string {
  const parts = [
    `${t.workers} worker${t.workers === 1 ? '' : 's'}`,
    `${formatCores(t.cores)} core${t.cores === 1 ? '' : 's'}`,
    formatSize(t.memory)
  ];
  if (t.gpus > 0) {
    parts.push(`${t.gpus} GPU${t.gpus === 1 ? '' : 's'}`);
  }
  return `→ ${parts.join(' · ')}`;
}

/**
 * The sum of all groups of a draft spec, if every group parses.
 */
export function specTotals(groups: IGroupDraft[]): ITotals | null {
  const sum: ITotals = { workers: 0, cores: 0, memory: 0, gpus: 0 };
  for (const group of groups) {
    const perWorker = perWorkerOfDraft(group);
    const count = parseCount(group.count);
    if (!perWorker || count === null) {
      return null;
    }
    const t = totals(perWorker, count);
    sum.workers += t.workers;
    sum.cores += t.cores;
    sum.memory += t.memory;
    sum.gpus += t.gpus;
  }
  return sum;
}
