/**
 * Events as the card and History show them: what was asked before what it
 * became, repeated notes counted, the warning colour only when asked for.
 */
import { eventChange, groupMemory, isWarning, repeatText } from '../events';
import { ICluster, IEvent } from '../types';

const GiB = 2 ** 30;

const event = (changes: Partial<IEvent> = {}): IEvent => ({
  time: '2026-12-05T12:00:00Z',
  kind: 'scale',
  message: 'manual scale',
  group: 'default',
  before: 2,
  after: 4,
  source: 'manual',
  ...changes
});

describe('eventChange', () => {
  it('says what was asked before what it became', () => {
    // Given a scale to "4 GiB" that gave 4 workers of 1 GiB
    const scaled = event({ asked: '4 GiB' });
    // Then the card reads "4 GiB → 4 workers × 1 GiB (from 2)"
    expect(eventChange(scaled, GiB)).toBe('4 GiB → 4 workers × 1 GiB (from 2)');
    expect(eventChange(scaled)).toBe('4 GiB → 4 workers (from 2)');
  });

  it('says what was asked and what came of it when the count stays', () => {
    expect(eventChange(event({ asked: '3 cores', before: 3, after: 3 }))).toBe(
      '3 cores → 3 workers'
    );
    // A spec edit that replaced both workers with 1 GiB ones
    expect(
      eventChange(
        event({
          asked: 'spec edited: default memory 8 GiB → 1 GiB',
          before: 2,
          after: 2,
          source: 'spec'
        }),
        GiB
      )
    ).toBe('spec edited: default memory 8 GiB → 1 GiB → 2 workers × 1 GiB');
  });

  it('reads as before without `asked` (an older server)', () => {
    expect(eventChange(event())).toBe('2 → 4 workers');
    expect(eventChange(event(), GiB)).toBe('2 → 4 workers');
    expect(eventChange(event({ before: 1, after: 1 }))).toBe(
      '1 worker, unchanged'
    );
  });

  it('shows what was asked of an event without counts (a spec edit)', () => {
    expect(
      eventChange(
        event({
          kind: 'lifecycle',
          before: null,
          after: null,
          asked: 'default memory 8 GiB → 1 GiB'
        })
      )
    ).toBe('default memory 8 GiB → 1 GiB');
    expect(eventChange(event({ before: null, after: null }))).toBe('');
  });
});

describe('repeatText', () => {
  it('counts a note that came several times in a row', () => {
    expect(repeatText(event({ kind: 'note', count: 3 }))).toBe(' ×3');
    expect(repeatText(event({ kind: 'note', count: 1 }))).toBe('');
    expect(repeatText(event({ kind: 'note' }))).toBe('');
  });
});

describe('isWarning', () => {
  it('is true only for level "warning", never for an ordinary note', () => {
    expect(isWarning(event({ kind: 'note', level: 'warning' }))).toBe(true);
    expect(isWarning(event({ kind: 'note', level: 'info' }))).toBe(false);
    expect(isWarning(event({ kind: 'note' }))).toBe(false);
  });
});

describe('groupMemory', () => {
  it('is the memory of one worker of the named group, or of the only group', () => {
    const spec = (names: string[]) =>
      ({
        spec: {
          groups: names.map((name, i) => ({
            name,
            count: 1,
            threads: 1,
            memory: (i + 1) * GiB,
            gpus: 0,
            resources: {}
          }))
        }
      }) as unknown as ICluster;
    expect(groupMemory(spec(['cpu', 'big']), 'big')).toBe(2 * GiB);
    expect(groupMemory(spec(['default']), null)).toBe(GiB);
    expect(groupMemory(spec(['cpu', 'big']), null)).toBeNull();
    expect(groupMemory(spec(['cpu']), 'gone')).toBeNull();
  });
});
