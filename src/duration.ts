/**
 * An idle timeout as a person types it ("30 min", "2 h", "90 s", "off") and
 * as the card shows it. Pure: no DOM, no server.
 */
import { trans } from './i18n';

const UNITS: ReadonlyArray<[RegExp, number]> = [
  [/^(s|sec|secs|second|seconds)$/, 1],
  [/^(m|min|mins|minute|minutes)$/, 60],
  [/^(h|hr|hrs|hour|hours)$/, 3600],
  [/^(d|day|days)$/, 86400]
];

/**
 * Seconds from "30 min", "1.5 h", "90 s" or a bare number of minutes; null
 * for "", "off", "never" or "0" (no idle shutdown). Throws with a message
 * the dialog shows when the text does not read.
 */
export function parseIdleTimeout(text: string): number | null {
  const value = text.trim().toLowerCase();
  if (!value || ['off', 'never', 'none', '0'].includes(value)) {
    return null;
  }
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/.exec(value);
  if (!match) {
    throw new Error(
      trans.__(
        '"%1" is not a duration: write e.g. 30 min, 2 h or off',
        text.trim()
      )
    );
  }
  const amount = parseFloat(match[1]);
  if (!match[2]) {
    return amount * 60; // a bare number: minutes
  }
  const unit = UNITS.find(([pattern]) => pattern.test(match[2]));
  if (!unit) {
    throw new Error(
      trans.__('"%1" is not a unit: use s, min, h or d', match[2])
    );
  }
  return amount * unit[1];
}

/**
 * "30 min", "2 h", "90 s", or "off", for an idle timeout in seconds.
 */
export function formatIdleTimeout(seconds: number | null | undefined): string {
  if (!seconds) {
    return 'off';
  }
  if (seconds % 3600 === 0) {
    return `${seconds / 3600} h`;
  }
  if (seconds % 60 === 0) {
    return `${seconds / 60} min`;
  }
  return `${seconds} s`;
}
