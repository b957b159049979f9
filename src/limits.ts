/**
 * The limits a plan is checked against before it is sent: the server's
 * worker limit per cluster, and (for workers that run on the server's host)
 * this machine's size.
 */
import { formatSize, plural } from './format';
import { ITotals } from './spec';
import { ILimits, IWorkerGroupSpec } from './types';

/**
 * Why a plan may not work out, in words; empty when it fits.
 * `runsProcessesHere`: the workers share this machine (the backend's
 * `runs_processes_here` capability), so its cores and memory bound them.
 */
export function limitWarnings(
  planned: ITotals,
  limits: ILimits | null,
  runsProcessesHere: boolean
): string[] {
  if (!limits) {
    return [];
  }
  const warnings: string[] = [];
  if (planned.workers > limits.max_workers) {
    warnings.push(
      `Above the limit of ${plural(limits.max_workers, 'worker')} per cluster: the server will refuse it`
    );
  }
  // Batch jobs and remote hosts do not share this machine.
  if (runsProcessesHere) {
    const { cores, memory } = limits.machine;
    if (planned.cores > cores) {
      warnings.push(
        `More than this machine’s ${plural(cores, 'core')}: workers will compete for them`
      );
    }
    if (planned.memory > memory) {
      warnings.push(
        `More than this machine’s ${formatSize(memory)} of memory: workers may be killed`
      );
    }
  }
  return warnings;
}

/**
 * What the groups other than `except` add up to, at their planned counts.
 */
export function otherGroupsTotals(
  groups: ReadonlyArray<IWorkerGroupSpec>,
  except: string | undefined
): ITotals {
  const sum: ITotals = { workers: 0, cores: 0, memory: 0, gpus: 0 };
  for (const g of groups) {
    if (g.name !== except) {
      sum.workers += g.count;
      sum.cores += g.count * g.threads;
      sum.memory += g.count * g.memory;
      sum.gpus += g.count * g.gpus;
    }
  }
  return sum;
}

/**
 * Two totals added up.
 */
export function addTotals(a: ITotals, b: ITotals): ITotals {
  return {
    workers: a.workers + b.workers,
    cores: a.cores + b.cores,
    memory: a.memory + b.memory,
    gpus: a.gpus + b.gpus
  };
}
