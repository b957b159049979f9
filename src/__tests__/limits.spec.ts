/**
 * The warnings the editors show before a plan is sent.
 */
import {
  addTotals,
  capRefusal,
  ICaps,
  inUseHere,
  limitWarnings,
  otherGroupsTotals
} from '../limits';
import { FULL_CAPABILITIES } from '../capabilities';
import { ITotals } from '../spec';
import { ICluster, ILimits, IWorkerGroupSpec } from '../types';

const GiB = 2 ** 30;

const limits: ILimits = {
  max_workers: 12,
  max_clusters: 4,
  machine: { cores: 2, memory: 8 * GiB }
};

const plan = (workers: number, cores: number, memory: number): ITotals => ({
  workers,
  cores,
  memory,
  gpus: 0
});

describe('limitWarnings', () => {
  it('says nothing about a plan that fits, or without limits', () => {
    expect(limitWarnings(plan(2, 2, 4 * GiB), limits, true)).toEqual([]);
    expect(limitWarnings(plan(99, 99, 99 * GiB), null, true)).toEqual([]);
  });

  it('warns that the server refuses more workers than its limit', () => {
    expect(limitWarnings(plan(13, 1, GiB), limits, false)).toEqual([
      'Above the limit of 12 workers per cluster: the server will refuse it'
    ]);
    expect(limitWarnings(plan(12, 1, GiB), limits, false)).toEqual([]);
  });

  it('warns when local workers want more than this machine has', () => {
    expect(limitWarnings(plan(4, 4, 16 * GiB), limits, true)).toEqual([
      'More than this machine’s 2 cores: workers will compete for them',
      'More than this machine’s 8 GiB of memory: workers may be killed'
    ]);
  });

  it('does not hold batch workers to this machine’s size', () => {
    expect(limitWarnings(plan(4, 64, 512 * GiB), limits, false)).toEqual([]);
  });
});

describe('caps', () => {
  const caps: ICaps = {
    max_cores: 16,
    max_memory: 64 * GiB,
    gpus_per_worker: 1,
    max_gpus: 2,
    memory_per_worker: 32 * GiB,
    where: 'a compute node'
  };
  const withCaps = { ...limits, caps: { slurm: caps } };

  it('warns that the server refuses a plan past a cap of all workers', () => {
    expect(limitWarnings(plan(17, 17, GiB), withCaps, false, 'slurm')).toEqual([
      'Above the limit of 12 workers per cluster: the server will refuse it',
      'Above the limit of 16 cores per cluster: the server will refuse it'
    ]);
    expect(
      limitWarnings(plan(2, 2, 65 * GiB), withCaps, false, 'slurm')
    ).toEqual([
      'Above the limit of 64 GiB of memory per cluster: the server will refuse it'
    ]);
    expect(
      limitWarnings({ ...plan(3, 3, GiB), gpus: 3 }, withCaps, false, 'slurm')
    ).toEqual([
      'More than the 2 GPUs of a compute node: the server will refuse it'
    ]);
  });

  it('holds a backend only to its own caps', () => {
    expect(limitWarnings(plan(2, 17, GiB), withCaps, false, 'sge')).toEqual([]);
  });

  it('names the group whose workers are too large, in its words', () => {
    const groups = [
      { name: 'cpu', count: 1, threads: 1, memory: GiB, gpus: 0 },
      { name: 'big', count: 1, threads: 1, memory: 48 * GiB, gpus: 0 }
    ];
    expect(capRefusal(groups, caps, 'spec', 'spec.groups')).toEqual({
      cap: 'memory_per_worker',
      field: 'spec.groups[1].memory',
      message: 'Group big asks for 48 GiB per worker; a compute node has 32 GiB'
    });
    expect(capRefusal(groups, caps, 'scale.workers')?.field).toBe(
      'scale.workers'
    );
  });
});

describe('otherGroupsTotals and addTotals', () => {
  const groups: IWorkerGroupSpec[] = [
    { name: 'cpu', count: 3, threads: 2, memory: GiB, gpus: 0, resources: {} },
    {
      name: 'gpu',
      count: 1,
      threads: 4,
      memory: 8 * GiB,
      gpus: 2,
      resources: {}
    }
  ];

  it('adds up the groups other than one', () => {
    expect(otherGroupsTotals(groups, 'gpu')).toEqual({
      workers: 3,
      cores: 6,
      memory: 3 * GiB,
      gpus: 0
    });
    expect(otherGroupsTotals(groups, undefined)).toEqual({
      workers: 4,
      cores: 10,
      memory: 11 * GiB,
      gpus: 2
    });
  });

  it('adds two totals', () => {
    expect(addTotals(plan(1, 2, GiB), plan(3, 4, 2 * GiB))).toEqual(
      plan(4, 6, 3 * GiB)
    );
  });
});

describe('the machine warnings count the clusters already running here', () => {
  const running = (
    id: string,
    cores: number,
    memory: number,
    extra: Partial<ICluster> = {}
  ): ICluster =>
    ({
      id,
      status: 'running',
      resources: { cores, memory, gpus: 0 },
      capabilities: {
        can_scale: true,
        can_stop: true,
        multiple_groups: true,
        readoptable: true,
        runs_processes_here: true
      },
      ...extra
    }) as ICluster;

  it('adds up the live clusters whose workers run here, except the one edited', () => {
    const clusters = [
      running('a', 1, 2 * GiB),
      running('b', 1, 3 * GiB),
      running('edited', 8, 8 * GiB),
      running('ended', 4, GiB, { status: 'failed' }),
      running('batch', 4, GiB, {
        capabilities: {
          ...FULL_CAPABILITIES,
          can_scale: true,
          can_stop: true,
          multiple_groups: true,
          readoptable: true,
          runs_processes_here: false
        }
      })
    ];
    expect(inUseHere(clusters, 'edited')).toEqual({
      clusters: 2,
      cores: 2,
      memory: 5 * GiB
    });
  });

  it('warns when a plan that fits alone does not fit beside them', () => {
    // Given a 2-core, 8 GiB machine where another cluster uses 1 core and 6 GiB
    const busy: ILimits = {
      ...limits,
      in_use_here: { clusters: 1, cores: 1, memory: 6 * GiB }
    };
    // When a plan of 2 cores and 4 GiB is checked
    // Then both warnings name what the other cluster uses
    expect(limitWarnings(plan(2, 2, 4 * GiB), busy, true)).toEqual([
      'With the 1 core another cluster uses here, more than this machine’s 2 cores: workers will compete for them',
      'With the 6 GiB another cluster uses here, more than this machine’s 8 GiB of memory: workers may be killed'
    ]);
    // And the same plan alone on the machine fits
    expect(limitWarnings(plan(2, 2, 4 * GiB), limits, true)).toEqual([]);
  });
});
