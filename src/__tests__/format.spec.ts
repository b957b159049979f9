/**
 * Sizes, counts and times as the sidebar shows them.
 */
import {
  editableSize,
  exactSize,
  formatBytes,
  formatCores,
  formatSize,
  formatMemoryUsage,
  formatTime,
  formatUsage,
  parseSize,
  plural,
  usageNow
} from '../format';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

describe('formatBytes', () => {
  it.each([
    [0, '0 B'],
    [512, '512 B'],
    [1023, '1023 B'],
    [1024, '1.00 KiB'],
    [1536 * MiB, '1.50 GiB'],
    [4 * GiB, '4.00 GiB'],
    [2 ** 60, '1.00 EiB']
  ])('shows %d bytes as %s', (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });

  it.each([null, undefined, -1, NaN, Infinity])(
    'shows a dash for %s',
    value => {
      expect(formatBytes(value)).toBe('–');
    }
  );
});

describe('formatSize', () => {
  it.each([
    [16 * GiB, '16 GiB'],
    [1536 * MiB, '1.5 GiB'],
    [1.25 * GiB, '1.25 GiB'],
    [512, '512 B']
  ])('shows %d bytes compactly as %s', (bytes, text) => {
    expect(formatSize(bytes)).toBe(text);
  });
});

describe('formatCores and plural', () => {
  it('shows whole cores as is and fractions with one decimal', () => {
    expect(formatCores(4)).toBe('4');
    expect(formatCores(1.5)).toBe('1.5');
    expect(formatCores(null)).toBe('–');
  });

  it('puts the noun in the plural unless there is exactly one', () => {
    expect(plural(1, 'core')).toBe('1 core');
    expect(plural(0, 'core')).toBe('0 cores');
    expect(plural(2, 'core')).toBe('2 cores');
    expect(plural(1.5, 'core')).toBe('1.5 cores');
    expect(plural(3, 'GPU', 'GPUs')).toBe('3 GPUs');
  });
});

describe('parseSize', () => {
  it.each([
    ['4 GiB', 4 * GiB],
    ['4gib', 4 * GiB],
    ['8Gi', 8 * GiB],
    ['1.5 GB', 1.5e9],
    ['1e9', 1e9],
    ['42', 42]
  ])('reads %s', (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(['', 'GiB', 'four GiB', '4 GiBs', '4 EiB', '1,5 GB'])(
    'refuses %p',
    text => {
      expect(parseSize(text)).toBeNull();
    }
  );
});

describe('editableSize', () => {
  it('writes GiB from 1 GiB up, like the summaries, two decimals at most', () => {
    expect(editableSize(4 * GiB)).toBe('4 GiB');
    expect(editableSize(9039 * MiB)).toBe('8.83 GiB');
    expect(editableSize(1536 * MiB)).toBe('1.5 GiB');
    expect(editableSize(2 ** 41)).toBe('2 TiB');
    // Below 1 GiB: the exact MiB
    expect(editableSize(512 * MiB)).toBe('512 MiB');
  });
});

describe('exactSize', () => {
  it('writes a size in the largest unit that divides it', () => {
    expect(exactSize(4 * GiB)).toBe('4 GiB');
    expect(exactSize(1536 * MiB)).toBe('1536 MiB');
    expect(exactSize(2 ** 41)).toBe('2 TiB');
    expect(exactSize(1000)).toBe('1000');
  });

  it.each([4 * GiB, 1536 * MiB, 2 ** 41, 1000, 3 * MiB + 1])(
    'reads %d back to the same bytes',
    bytes => {
      const text = exactSize(bytes);
      // A bare byte count reads as bytes too.
      expect(parseSize(text)).toBe(bytes);
    }
  );
});

describe('formatTime', () => {
  it('shows the local time of day of a timestamp', () => {
    const iso = '2026-12-01T10:20:30Z';
    expect(formatTime(iso)).toBe(
      new Date(iso).toLocaleTimeString(undefined, { hour12: false })
    );
    expect(formatTime(iso)).toMatch(/\d{1,2}:\d{2}:\d{2}/);
  });

  it('shows text that is no timestamp as it is', () => {
    expect(formatTime('soon')).toBe('soon');
  });
});

describe('formatUsage', () => {
  it.each([
    [0, '0 core-seconds'],
    [40.4, '40 core-seconds'],
    [750, '12.5 core-minutes'],
    [12.4 * 3600, '12.4 core-hours']
  ])('shows %d core-seconds as %s', (seconds, text) => {
    expect(formatUsage(seconds, 'core')).toBe(text);
  });

  it('shows memory in GiB-hours, and nothing while there is too little to say (never KiB-hours)', () => {
    expect(formatMemoryUsage(1.5 * GiB * 3600)).toBe('1.5 GiB-hours');
    expect(formatMemoryUsage(20 * GiB * 3600)).toBe('20 GiB-hours');
    // Given a new cluster: a few seconds of one 1 GiB worker
    expect(formatMemoryUsage(GiB * 10)).toBeNull();
    expect(formatMemoryUsage(0)).toBeNull();
  });

  it('carries usage on from as_of at its rate', () => {
    const usage = {
      core_seconds: 10,
      gpu_seconds: 0,
      memory_seconds: MiB,
      as_of: '2026-12-01T12:00:00+00:00',
      rate: { cores: 2, gpus: 1, memory: MiB }
    };
    const later = new Date('2026-12-01T12:01:00+00:00').getTime();
    expect(usageNow(usage, later)).toEqual({
      core_seconds: 130,
      gpu_seconds: 60,
      memory_seconds: 61 * MiB
    });
    // a clock behind the server's adds nothing
    expect(usageNow(usage, later - 3600 * 1000).core_seconds).toBe(10);
  });
});
