/**
 * Worker Spec drafts, their requests and the preview of what a target needs.
 */
import {
  convertAmount,
  draftFromGroup,
  formatTotals,
  groupProblems,
  groupRequest,
  IGroupDraft,
  newGroupDraft,
  perWorkerOfDraft,
  specIsValid,
  specRequest,
  specTotals,
  totals,
  workersFor
} from '../spec';
import { IWorkerGroupSpec } from '../types';

const GiB = 2 ** 30;

const group: IWorkerGroupSpec = {
  name: 'default',
  count: 2,
  threads: 2,
  memory: 4 * GiB,
  gpus: 0,
  resources: {}
};

const draft = (changes: Partial<IGroupDraft> = {}): IGroupDraft => ({
  name: 'default',
  count: '2',
  threads: '2',
  memory: '4 GiB',
  gpus: '0',
  ...changes
});

describe('drafts', () => {
  it('shows a group as text that reads back to it, memory in GiB', () => {
    const text = draftFromGroup({ ...group, memory: 1536 * 2 ** 20 });
    expect(text).toMatchObject(draft({ memory: '1.5 GiB' }));
    expect(perWorkerOfDraft(text)).toEqual({
      threads: 2,
      memory: 1536 * 2 ** 20,
      gpus: 0
    });
  });

  it('pre-fills memory in GiB like the summaries, and an untouched field sends the exact bytes', () => {
    // Given a group of 9039 MiB per worker (not a whole number of GiB)
    const bytes = 9039 * 2 ** 20;
    const text = draftFromGroup({ ...group, memory: bytes });
    // Then the field reads in GiB, never "9039 MiB"
    expect(text.memory).toBe('8.83 GiB');
    // And left as it is, it sends (and previews) the group's own bytes: no change
    expect(groupRequest(text).memory).toBe(bytes);
    expect(perWorkerOfDraft(text)?.memory).toBe(bytes);
    // When the user types a size, that is sent as typed
    expect(groupRequest({ ...text, memory: '8 GiB' }).memory).toBe('8 GiB');
  });

  it('offers a new group like the last one, under a free name', () => {
    const groups = [draft(), draft({ name: 'group-2', threads: '8' })];
    expect(newGroupDraft(groups)).toEqual({
      name: 'group-3',
      count: '1',
      threads: '8',
      memory: '4 GiB',
      gpus: '0'
    });
    expect(newGroupDraft([]).name).toBe('group-1');
  });
});

describe('requests', () => {
  it('sends numbers as numbers and the memory as typed', () => {
    expect(groupRequest(draft({ name: ' big ', memory: ' 8 GiB ' }))).toEqual({
      name: 'big',
      count: 2,
      threads: 2,
      memory: '8 GiB',
      gpus: 0
    });
  });

  it('sends what is no number as typed, for the server to explain', () => {
    expect(groupRequest(draft({ threads: 'two' })).threads).toBe('two');
    expect(specRequest([draft(), draft({ name: 'b' })]).groups).toHaveLength(2);
  });
});

describe('problems', () => {
  it('names each field that does not read', () => {
    const problems = groupProblems(
      draft({ name: ' ', count: '-1', threads: '0', memory: '4', gpus: 'x' })
    );
    expect(Object.keys(problems).sort()).toEqual(
      ['count', 'gpus', 'memory', 'name', 'threads'].sort()
    );
    expect(problems.name).toBe('Enter a group name');
    expect(problems.threads).toBe('Enter at least 1');
  });

  it('finds a spec valid only when every group reads', () => {
    expect(specIsValid([draft(), draft({ name: 'b' })])).toBe(true);
    expect(specIsValid([draft(), draft({ memory: 'lots' })])).toBe(false);
  });
});

describe('targets', () => {
  const perWorker = { threads: 2, memory: 4 * GiB, gpus: 1 };

  it('rounds a target up to whole workers', () => {
    expect(workersFor(perWorker, 'workers', 3)).toBe(3);
    expect(workersFor(perWorker, 'cores', 5)).toBe(3);
    expect(workersFor(perWorker, 'memory', 9 * GiB)).toBe(3);
    expect(workersFor(perWorker, 'memory', 0)).toBe(0);
  });

  it('adds up what the workers have', () => {
    expect(totals(perWorker, 3)).toEqual({
      workers: 3,
      cores: 6,
      memory: 12 * GiB,
      gpus: 3
    });
  });

  it('converts an amount through the whole workers it means', () => {
    expect(convertAmount(perWorker, 'cores', 'workers', '5')).toBe('3');
    expect(convertAmount(perWorker, 'workers', 'cores', '3')).toBe('6');
    expect(convertAmount(perWorker, 'cores', 'memory', '3')).toBe('8 GiB');
    expect(convertAmount(perWorker, 'workers', 'cores', 'x')).toBe('');
    expect(convertAmount(null, 'workers', 'cores', '3')).toBe('');
  });
});

describe('totals', () => {
  it('says what a plan adds up to, GPUs only when there are some', () => {
    expect(
      formatTotals({ workers: 4, cores: 8, memory: 16 * GiB, gpus: 0 })
    ).toBe('→ 4 workers · 8 cores · 16 GiB');
    expect(
      formatTotals({ workers: 1, cores: 1, memory: 1.5 * GiB, gpus: 1 })
    ).toBe('→ 1 worker · 1 core · 1.5 GiB · 1 GPU');
  });

  it('sums all groups of a draft, or nothing when one does not read', () => {
    expect(
      specTotals([draft(), draft({ name: 'b', count: '1', gpus: '2' })])
    ).toEqual({ workers: 3, cores: 6, memory: 12 * GiB, gpus: 2 });
    expect(specTotals([draft(), draft({ count: 'many' })])).toBeNull();
  });
});
