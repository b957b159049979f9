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
