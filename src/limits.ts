/**
 * The limits a plan is checked against before it is sent: the server's
 * worker limit and caps per cluster, and (for workers that run on the
 * server's host) this machine's size.
 */
import { formatSize, plural } from './format';
import { ITotals } from './spec';
import { capabilitiesOf } from './capabilities';
import { hasEnded } from './cardstate';
import { ICluster, IInUseHere, ILimits, IWorkerGroupSpec } from './types';
import { trans } from './i18n';

/**
 * The caps the server checks a cluster's plan against (its `Limits`, one
 * set per backend); `null`: no cap of that kind.
 */
export interface ICaps {
  max_cores: number | null;
  max_memory: number | null;
  gpus_per_worker: number | null;
  max_gpus: number | null;
  memory_per_worker: number | null;
  /** Where the workers run, in words: "this machine", "a compute node". */
  where?: string;
}

/**
 * Limits with the caps of each backend, when the server gives them.
 */
export type ILimitsWithCaps = ILimits & { caps?: { [backend: string]: ICaps } };

/**
 * Which cap a plan goes past, the request field the server names for it, and
 * why, in words.
 */
export interface ICapRefusal {
  cap: keyof Omit<ICaps, 'where'>;
  field: string;
  message: string;
}

type PlannedGroup = Pick<
  IWorkerGroupSpec,
  'name' | 'count' | 'threads' | 'memory' | 'gpus'
>;

const refused = () => trans.__('the server will refuse it');

/**
 * The first cap of all workers together that `planned` goes past, as the
 * server checks them: cores, then GPUs, then memory.
 */
function totalsRefusal(
  planned: ITotals,
  caps: ICaps,
  field: string
): ICapRefusal | null {
  const where = caps.where ?? trans.__('this server');
  if (caps.max_cores !== null && planned.cores > caps.max_cores) {
    return {
      cap: 'max_cores',
      field,
      message: trans.__(
        'Above the limit of %1 per cluster: %2',
        plural(caps.max_cores, 'core'),
        refused()
      )
    };
  }
  if (caps.max_gpus !== null && planned.gpus > caps.max_gpus) {
    return {
      cap: 'max_gpus',
      field,
      message: trans.__(
        'More than the %1 of %2: %3',
        plural(caps.max_gpus, 'GPU'),
        where,
        refused()
      )
    };
  }
  if (caps.max_memory !== null && planned.memory > caps.max_memory) {
    return {
      cap: 'max_memory',
      field,
      message: trans.__(
        'Above the limit of %1 of memory per cluster: %2',
        formatSize(caps.max_memory),
        refused()
      )
    };
  }
  return null;
}

/**
 * Why the server refuses a plan, as its `Limits.check` does: the first group
 * whose workers ask for more GPUs or memory each than `where` has, else the
 * first cap all workers together go past; `null` when it fits.
 *
 * `groupsField` is where the groups are in the request (`spec.groups`) when
 * it gave them: a group's problem is then named per group.
 */
export function capRefusal(
  groups: ReadonlyArray<PlannedGroup>,
  caps: ICaps,
  field: string,
  groupsField?: string
): ICapRefusal | null {
  const where = caps.where ?? trans.__('this server');
  for (const [i, g] of groups.entries()) {
    const at = (key: string) =>
      groupsField ? `${groupsField}[${i}].${key}` : field;
    if (caps.gpus_per_worker !== null && g.gpus > caps.gpus_per_worker) {
      return {
        cap: 'gpus_per_worker',
        field: at('gpus'),
        message: trans.__(
          'Group %1 asks for %2 per worker; %3 has %4',
          g.name,
          plural(g.gpus, 'GPU'),
          where,
          caps.gpus_per_worker
        )
      };
    }
    if (caps.memory_per_worker !== null && g.memory > caps.memory_per_worker) {
      return {
        cap: 'memory_per_worker',
        field: at('memory'),
        message: trans.__(
          'Group %1 asks for %2 per worker; %3 has %4',
          g.name,
          formatSize(g.memory),
          where,
          formatSize(caps.memory_per_worker)
        )
      };
    }
  }
  const planned: ITotals = { workers: 0, cores: 0, memory: 0, gpus: 0 };
  for (const g of groups) {
    planned.workers += g.count;
    planned.cores += g.count * g.threads;
    planned.memory += g.count * g.memory;
    planned.gpus += g.count * g.gpus;
  }
  return totalsRefusal(planned, caps, field);
}

/**
 * Why a plan may not work out, in words; empty when it fits.
 * `runsProcessesHere`: the workers share this machine (the backend's
 * `runs_processes_here` capability), so its cores and memory bound them.
 */
export function limitWarnings(
  planned: ITotals,
  limits: ILimitsWithCaps | null,
  runsProcessesHere: boolean,
  backend?: string
): string[] {
  if (!limits) {
    return [];
  }
  const warnings: string[] = [];
  if (planned.workers > limits.max_workers) {
    warnings.push(
      trans.__(
        'Above the limit of %1 per cluster: %2',
        plural(limits.max_workers, 'worker'),
        refused()
      )
    );
  }
  const caps = backend === undefined ? undefined : limits.caps?.[backend];
  const refusal = caps ? totalsRefusal(planned, caps, '') : null;
  if (refusal) {
    warnings.push(refusal.message);
  }
  // Batch jobs and remote hosts do not share this machine.
  if (runsProcessesHere) {
    const { cores, memory } = limits.machine;
    const used = limits.in_use_here;
    const usedCores = used?.cores ?? 0;
    const usedMemory = used?.memory ?? 0;
    const others =
      used && used.clusters === 1
        ? trans.__('another cluster uses')
        : trans.__('%1 other clusters use', used?.clusters);
    if (planned.cores + usedCores > cores) {
      warnings.push(
        usedCores
          ? trans.__(
              'With the %1 %2 here, more than this machine’s %3: workers will compete for them',
              plural(usedCores, 'core'),
              others,
              plural(cores, 'core')
            )
          : trans.__(
              'More than this machine’s %1: workers will compete for them',
              plural(cores, 'core')
            )
      );
    }
    if (planned.memory + usedMemory > memory) {
      warnings.push(
        usedMemory
          ? trans.__(
              'With the %1 %2 here, more than this machine’s %3 of memory: workers may be killed',
              formatSize(usedMemory),
              others,
              formatSize(memory)
            )
          : trans.__(
              'More than this machine’s %1 of memory: workers may be killed',
              formatSize(memory)
            )
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

/**
 * What the live clusters other than `except` use on this machine: those
 * whose workers run here (`runs_processes_here`), by their running workers.
 */
export function inUseHere(
  clusters: ReadonlyArray<ICluster>,
  except?: string
): IInUseHere {
  const used: IInUseHere = { clusters: 0, cores: 0, memory: 0 };
  for (const c of clusters) {
    if (
      c.id === except ||
      hasEnded(c) ||
      c.status === 'stopping' ||
      !capabilitiesOf(c).runs_processes_here ||
      (!c.resources.cores && !c.resources.memory)
    ) {
      continue;
    }
    used.clusters += 1;
    used.cores += c.resources.cores;
    used.memory += c.resources.memory;
  }
  return used;
}
