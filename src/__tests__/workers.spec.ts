/**
 * A worker's memory as the card's Workers list shows it.
 */
import { IWorkerInfo } from '../types';
import { workerMemoryText } from '../workers';

const MiB = 2 ** 20;

const worker = (changes: Partial<IWorkerInfo> = {}): IWorkerInfo => ({
  name: 'default-0',
  group: 'default',
  address: 'tls://127.0.0.1:35411',
  host: '127.0.0.1',
  pid: 4242,
  memory: 310 * MiB,
  memory_limit: 512 * MiB,
  threads: 1,
  state: 'running',
  ...changes
});

describe('workerMemoryText', () => {
  it('says what a worker uses of its limit, in the summaries’ units', () => {
    expect(workerMemoryText(worker())).toBe('310 MiB of 512 MiB');
  });

  it('says what is known when one of them is not (a starting worker)', () => {
    expect(workerMemoryText(worker({ memory: null }))).toBe('512 MiB limit');
    expect(workerMemoryText(worker({ memory_limit: null }))).toBe('310 MiB');
    expect(workerMemoryText(worker({ memory: null, memory_limit: null }))).toBe(
      ''
    );
  });
});
