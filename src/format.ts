import { trans } from './i18n';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

/**
 * Format a number of bytes with binary units: `4.00 GiB`, `512 B`.
 */
export function formatBytes(bytes: number | null | undefined): string {
  if (typeof bytes !== 'number' || !isFinite(bytes) || bytes < 0) {
    return '–';
  }
  if (bytes < 1024) {
    return `${Math.round(bytes)} B`;
  }
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(2)} ${UNITS[unit]}`;
}

/**
 * Format a core count: whole numbers as is, fractions with one decimal.
 */
export function formatCores(cores: number | null | undefined): string {
  if (typeof cores !== 'number' || !isFinite(cores)) {
    return '–';
  }
  return Number.isInteger(cores) ? String(cores) : cores.toFixed(1);
}

/**
 * Format a number of bytes compactly, everywhere a size is shown:
 * `16 GiB`, `1.5 GiB`.
 */
export function formatSize(bytes: number): string {
  return formatBytes(bytes).replace(/(\.\d*[1-9])0+ |\.0+ /, '$1 ');
}

/**
 * A count with its noun, singular or plural: `1 core`, `2 cores`, `1.5 cores`.
 */
export function plural(
  count: number,
  noun: string,
  nouns = `${noun}s`
): string {
  const text = Number.isInteger(count) ? String(count) : formatCores(count);
  // The nouns the extension counts, in words a language pack translates.
  switch (noun) {
    case 'worker':
      return trans._n('%2 worker', '%2 workers', count, text);
    case 'core':
      return trans._n('%2 core', '%2 cores', count, text);
    case 'GPU':
      return trans._n('%2 GPU', '%2 GPUs', count, text);
    case 'cluster':
      return trans._n('%2 cluster', '%2 clusters', count, text);
    default:
      return `${text} ${count === 1 ? noun : nouns}`;
  }
}

const SIZE_UNITS: { [unit: string]: number } = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  p: 1e15,
  pb: 1e15,
  ki: 2 ** 10,
  kib: 2 ** 10,
  mi: 2 ** 20,
  mib: 2 ** 20,
  gi: 2 ** 30,
  gib: 2 ** 30,
  ti: 2 ** 40,
  tib: 2 ** 40,
  pi: 2 ** 50,
  pib: 2 ** 50
};

/**
 * Read a size the way the server does (`dask.utils.parse_bytes`, and no
 * size without a digit): `4 GiB`, `4GB`, `1.5 gb`, `8Gi`, `1e9`, or a plain
 * byte count. Returns `null` for anything else; the server has the last word.
 */
export function parseSize(text: string): number | null {
  // parse_bytes drops the spaces, then reads the trailing letters as the unit.
  const compact = text.trim().replace(/ /g, '');
  const match = /^([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)([a-z]*)$/i.exec(
    compact
  );
  if (!match) {
    return null;
  }
  const factor = SIZE_UNITS[match[2].toLowerCase()];
  if (factor === undefined) {
    return null;
  }
  // int() in Python: towards zero.
  return Math.trunc(Number(match[1]) * factor);
}

/**
 * A short "when" for a timestamp: the local time of day.
 */
export function formatTime(iso: string): string {
  const date = new Date(iso);
  return isNaN(date.getTime())
    ? iso
    : date.toLocaleTimeString(undefined, { hour12: false });
}

/**
 * A size as text that reads back to exactly the same bytes:
 * `4 GiB`, `1536 MiB`, or the byte count.
 */
export function exactSize(bytes: number): string {
  for (const [unit, factor] of [
    ['TiB', 2 ** 40],
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20]
  ] as const) {
    if (bytes >= factor && bytes % factor === 0) {
      return `${bytes / factor} ${unit}`;
    }
  }
  return String(bytes);
}

/**
 * A size as an editor field starts with, in the unit the summaries use:
 * GiB from 1 GiB up (`4 GiB`, `8.83 GiB`: two decimals at most), TiB from
 * 1 TiB when that is whole, and below 1 GiB the exact MiB (`512 MiB`).
 */
export function editableSize(bytes: number): string {
  const exact = exactSize(bytes);
  if (bytes < 2 ** 30 || /GiB|TiB/.test(exact)) {
    return exact;
  }
  return `${Number((bytes / 2 ** 30).toFixed(2))} GiB`;
}

/**
 * An amount of use in `unit`-seconds as seconds, minutes or hours, whichever
 * reads best: `40 core-seconds`, `12.5 core-minutes`, `12.4 core-hours`.
 */
export function formatUsage(seconds: number, unit: 'core' | 'GPU'): string {
  // Whole phrases per unit, so that a language pack words each its own way.
  const words =
    unit === 'core'
      ? {
          seconds: (n: string) => trans.__('%1 core-seconds', n),
          minutes: (n: string) => trans.__('%1 core-minutes', n),
          hours: (n: string) => trans.__('%1 core-hours', n)
        }
      : {
          seconds: (n: string) => trans.__('%1 GPU-seconds', n),
          minutes: (n: string) => trans.__('%1 GPU-minutes', n),
          hours: (n: string) => trans.__('%1 GPU-hours', n)
        };
  if (!isFinite(seconds) || seconds < 60) {
    const whole = Math.max(0, Math.round(isFinite(seconds) ? seconds : 0));
    return words.seconds(String(whole));
  }
  if (seconds < 3600) {
    return words.minutes((seconds / 60).toFixed(1));
  }
  return words.hours((seconds / 3600).toFixed(1));
}

/**
 * Memory use (byte-seconds) in GiB-hours, one decimal: `1.5 GiB-hours`;
 * null below 0.1 GiB-hours (a new cluster: nothing worth a number yet, and
 * never a `KiB-hours`).
 */
export function formatMemoryUsage(byteSeconds: number): string | null {
  const hours = Math.max(0, byteSeconds) / 2 ** 30 / 3600;
  if (!isFinite(hours) || hours < 0.05) {
    return null;
  }
  return trans.__('%1 GiB-hours', String(Number(hours.toFixed(1))));
}

/**
 * Usage carried on from `as_of` to `now` (ms) at its rate: what it is now.
 */
export function usageNow(
  usage: {
    core_seconds: number;
    gpu_seconds: number;
    memory_seconds: number;
    as_of: string | null;
    rate: { cores: number; gpus: number; memory: number };
  },
  now: number
): { core_seconds: number; gpu_seconds: number; memory_seconds: number } {
  const since = usage.as_of ? new Date(usage.as_of).getTime() : NaN;
  const elapsed = isNaN(since) ? 0 : Math.max(0, (now - since) / 1000);
  return {
    core_seconds: usage.core_seconds + usage.rate.cores * elapsed,
    gpu_seconds: usage.gpu_seconds + usage.rate.gpus * elapsed,
    memory_seconds: usage.memory_seconds + usage.rate.memory * elapsed
  };
}
