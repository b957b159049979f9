/**
 * What the editors check before anything is sent: counts and sizes as typed,
 * each with a message that says what is wrong and how to put it right; and
 * request field paths (`spec.groups[0].count`) in the words the form uses.
 */
import { parseSize } from './format';
import { trans } from './i18n';

/**
 * A value as typed: its number, or why there is none.
 */
export type Checked =
  { value: number; error: null } | { value: null; error: string };

const ok = (value: number): Checked => ({ value, error: null });
const bad = (error: string): Checked => ({ value: null, error });

const NUMBER = /^\s*[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*$/i;

/**
 * The server's largest count (`spec.LARGEST_COUNT`) and first size past its
 * largest (`spec.LARGEST_SIZE` is 2 ** 63 - 1, which a double cannot hold).
 */
export const LARGEST_COUNT = 2 ** 31 - 1;
const TOO_LARGE_SIZE = 2 ** 63;

/**
 * A number as typed (`3`, `3.0`, `1e3`, `-2`), else `null`: what a request
 * sends as a number, so the server reads the same value the editor checked.
 */
export function readNumber(text: string): number | null {
  return NUMBER.test(text) ? Number(text) : null;
}

/**
 * A whole number of `noun` (plural), at least `minimum`.
 */
export function checkCount(text: string, noun: string, minimum = 0): Checked {
  const trimmed = text.trim();
  if (!trimmed) {
    return bad(trans.__('Enter a number of %1', noun));
  }
  if (!NUMBER.test(trimmed)) {
    return bad(trans.__('“%1” is not a number of %2', trimmed, noun));
  }
  const value = Number(trimmed);
  if (value < 0) {
    return bad(
      trans.__('Cannot be negative: enter %1 or more %2', minimum, noun)
    );
  }
  if (!Number.isInteger(value)) {
    return bad(trans.__('Enter a whole number of %1, not %2', noun, trimmed));
  }
  if (value < minimum) {
    return bad(trans.__('Enter at least %1', minimum));
  }
  if (value > LARGEST_COUNT) {
    return bad(trans.__('Enter at most %1 %2', LARGEST_COUNT, noun));
  }
  return ok(value);
}

/**
 * A size with its unit (`4 GiB`, `512MB`). A bare number is refused rather
 * than read as bytes: `4` is far more likely to mean 4 GiB than 4 bytes.
 */
export function checkSize(
  text: string,
  options: { allowZero?: boolean } = {}
): Checked {
  const trimmed = text.trim();
  if (!trimmed) {
    return bad(trans.__('Enter a size, e.g. 4 GiB'));
  }
  if (trimmed.startsWith('-')) {
    return bad(trans.__('Cannot be negative: enter a size such as 4 GiB'));
  }
  if (NUMBER.test(trimmed)) {
    const value = Number(trimmed);
    if (value === 0 && options.allowZero) {
      return ok(0);
    }
    return bad(
      trans.__('%1 what? Add a unit: %1 GiB, %1 MiB, %1 TB…', trimmed)
    );
  }
  const bytes = parseSize(trimmed);
  if (bytes === null) {
    return bad(
      trans.__('“%1” is not a size; use e.g. 512 MiB, 4 GiB or 1 TB', trimmed)
    );
  }
  if (bytes === 0 && !options.allowZero) {
    return bad(trans.__('Must be more than 0, e.g. 4 GiB'));
  }
  if (bytes >= TOO_LARGE_SIZE) {
    return bad(trans.__('Too large: at most 8 EiB'));
  }
  return ok(bytes);
}

/**
 * The amount typed for a unit: a count of workers or cores, or a size.
 */
export function checkAmount(
  unit: 'workers' | 'cores' | 'memory',
  text: string
): Checked {
  return unit === 'memory'
    ? checkSize(text, { allowZero: true })
    : checkCount(text, unit);
}

const groupKeys = (): { [key: string]: string } => ({
  name: trans.__('Name'),
  count: trans.__('Workers'),
  threads: trans.__('Threads'),
  memory: trans.__('Memory'),
  gpus: trans.__('GPUs'),
  resources: trans.__('Resources')
});

const fields = (): { [field: string]: string } => ({
  name: trans.__('Name'),
  template: trans.__('Template'),
  spec: trans.__('Worker Spec'),
  'spec.groups': trans.__('Worker groups'),
  scale: trans.__('Scale'),
  'scale.workers': trans.__('Scale to'),
  'scale.cores': trans.__('Scale to'),
  'scale.memory': trans.__('Scale to'),
  'scale.group': trans.__('Group'),
  adapt: trans.__('Adaptive mode'),
  'adapt.minimum': trans.__('Adaptive minimum'),
  'adapt.maximum': trans.__('Adaptive maximum'),
  'adapt.unit': trans.__('Adaptive unit'),
  'adapt.group': trans.__('Adaptive group')
});

/**
 * A request field in the form's words: `spec.groups[0].count` is
 * "Workers of group default" (the group's name when known, else its number).
 */
export function fieldLabel(field: string, groupNames: string[] = []): string {
  const group = /^spec\.groups\[(\d+)\](?:\.(\w+))?(?:\.(.+))?$/.exec(field);
  if (group) {
    const index = Number(group[1]);
    const name = groupNames[index] || String(index + 1);
    if (!group[2]) {
      return trans.__('Group %1', name);
    }
    const key = groupKeys()[group[2]] ?? group[2];
    return group[3]
      ? trans.__('Resource %1 of group %2', group[3], name)
      : trans.__('%1 of group %2', key, name);
  }
  const known = fields()[field];
  if (known) {
    return known;
  }
  const last = field.split('.').pop() ?? field;
  return last.charAt(0).toUpperCase() + last.slice(1).replace(/_/g, ' ');
}

/**
 * A server message without the field path the server puts in front of it.
 */
export function stripField(message: string, field: string | null): string {
  if (field && message.startsWith(`${field}: `)) {
    return message.slice(field.length + 2);
  }
  return message;
}
