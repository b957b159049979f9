/**
 * The warnings the editors show before a plan is sent.
 */
import { addTotals, limitWarnings, otherGroupsTotals } from '../limits';
import { ITotals } from '../spec';
import { ILimits, IWorkerGroupSpec } from '../types';

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
    expect(limitWarnings(plan(2, 2, 4 * GiB), limits, 'local')).toEqual([]);
    expect(limitWarnings(plan(99, 99, 99 * GiB), null, 'local')).toEqual([]);
  });

  it('warns that the server refuses more workers than its limit', () => {
    expect(limitWarnings(plan(13, 1, GiB), limits, 'slurm')).toEqual([
      'Above the limit of 12 workers per cluster: the server will refuse it'
    ]);
    expect(limitWarnings(plan(12, 1, GiB), limits, 'slurm')).toEqual([]);
  });

  it('warns when local workers want more than this machine has', () => {
    expect(limitWarnings(plan(4, 4, 16 * GiB), limits, 'local')).toEqual([
      'More than this machine’s 2 cores: workers will compete for them',
      'More than this machine’s 8 GiB of memory: workers may be killed'
    ]);
  });

  it('does not hold batch workers to this machine’s size', () => {
    expect(limitWarnings(plan(4, 64, 512 * GiB), limits, 'slurm')).toEqual([]);
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
