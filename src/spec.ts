/**
 * Worker Specs as the editors handle them: text drafts of worker groups,
 * their requests, and the client-side preview of what a target resolves to
 * (the server resolves the same way: round up to whole workers).
 */
import { editableSize, formatSize, plural } from './format';
import { checkAmount, checkCount, checkSize, readNumber } from './validate';
import {
  AdaptUnit,
  IWorkerGroupRequest,
  IWorkerGroupSpec,
  IWorkerSpecRequest
} from './types';
import { trans } from './i18n';

/**
 * A worker group as typed in the editor.
 */
export interface IGroupDraft {
  name: string;
  count: string;
  threads: string;
  memory: string;
  gpus: string;
  /**
   * The group's memory in bytes, while `memory` still reads as pre-filled
   * (a rounded GiB value): sent as is, so an untouched field changes
   * nothing.
   */
  memoryBytes?: { text: string; bytes: number };
}

/**
 * The fields of a group draft the editor shows.
 */
export type GroupField = Exclude<keyof IGroupDraft, 'memoryBytes'>;

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
    memory: editableSize(group.memory),
    gpus: String(group.gpus),
    memoryBytes: { text: editableSize(group.memory), bytes: group.memory }
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
    gpus: '0',
    memoryBytes: last?.memoryBytes
  };
}

/**
 * The request for a draft. Numbers go as the numbers the editor read (`3.0`
 * is 3); text that is no number is sent as typed, so the server explains
 * what is wrong with it next to the field.
 */
export function groupRequest(draft: IGroupDraft): IWorkerGroupRequest {
  const asNumber = (text: string) => {
    const value = readNumber(text);
    return (value ?? text) as number;
  };
  return {
    name: draft.name.trim(),
    count: asNumber(draft.count),
    threads: asNumber(draft.threads),
    memory: untouchedMemory(draft) ?? draft.memory.trim(),
    gpus: asNumber(draft.gpus)
  };
}

/**
 * The bytes of a draft's memory while it reads as pre-filled, else null.
 */
function untouchedMemory(draft: IGroupDraft): number | null {
  const exact = draft.memoryBytes;
  return exact && draft.memory.trim() === exact.text ? exact.bytes : null;
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
  const threads = checkCount(draft.threads, 'threads', 1).value;
  const memory = untouchedMemory(draft) ?? checkSize(draft.memory).value;
  const gpus = checkCount(draft.gpus, 'GPUs').value;
  if (threads === null || memory === null || gpus === null) {
    return null;
  }
  return { threads, memory, gpus };
}

/**
 * What is wrong with each field of a group as typed, by field.
 */
export function groupProblems(
  draft: IGroupDraft
): Partial<Record<GroupField, string>> {
  const problems: Partial<Record<GroupField, string>> = {};
  if (!draft.name.trim()) {
    problems.name = trans.__('Enter a group name');
  }
  const checks = {
    count: checkCount(draft.count, 'workers'),
    threads: checkCount(draft.threads, 'threads', 1),
    memory: checkSize(draft.memory),
    gpus: checkCount(draft.gpus, 'GPUs')
  };
  for (const [key, check] of Object.entries(checks)) {
    if (check.error) {
      problems[key as GroupField] = check.error;
    }
  }
  return problems;
}

/**
 * Whether every group of a draft spec reads.
 */
export function specIsValid(groups: IGroupDraft[]): boolean {
  return groups.every(g => Object.keys(groupProblems(g)).length === 0);
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
  return checkAmount(unit, text).value;
}

/**
 * An amount typed in one unit, in another: through the whole workers it
 * means (`2` workers of 2 threads are `4` cores). Empty when it does not read.
 */
export function convertAmount(
  perWorker: IPerWorker | null,
  from: AdaptUnit,
  to: AdaptUnit,
  text: string
): string {
  const amount = parseAmount(from, text);
  if (amount === null || !perWorker) {
    return '';
  }
  const workers = workersFor(perWorker, from, amount);
  if (to === 'workers') {
    return String(workers);
  }
  return to === 'cores'
    ? String(workers * perWorker.threads)
    : editableSize(workers * perWorker.memory);
}

/**
 * "→ 4 workers · 8 cores · 16 GiB" (and GPUs when there are any).
 */
export function formatTotals(t: ITotals): string {
  const parts = [
    plural(t.workers, 'worker'),
    plural(t.cores, 'core'),
    formatSize(t.memory)
  ];
  if (t.gpus > 0) {
    parts.push(plural(t.gpus, 'GPU'));
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
    const count = checkCount(group.count, 'workers').value;
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
