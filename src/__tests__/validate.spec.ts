/**
 * What the editors say about counts and sizes as typed, and field names.
 */
import {
  checkAmount,
  checkCount,
  checkSize,
  fieldLabel,
  readNumber,
  stripField
} from '../validate';

describe('checkCount', () => {
  it('reads a whole number', () => {
    expect(checkCount(' 4 ', 'workers')).toEqual({ value: 4, error: null });
  });

  it.each([
    ['', 0, 'Enter a number of workers'],
    ['four', 0, '“four” is not a number of workers'],
    ['-1', 0, 'Cannot be negative: enter 0 or more workers'],
    ['1.5', 0, 'Enter a whole number of workers, not 1.5'],
    ['0', 1, 'Enter at least 1'],
    ['3000000000', 0, 'Enter at most 2147483647 workers']
  ])('refuses %p (minimum %d): %s', (text, minimum, error) => {
    expect(checkCount(text, 'workers', minimum)).toEqual({
      value: null,
      error
    });
  });
});

describe('checkSize', () => {
  it('reads a size with its unit', () => {
    expect(checkSize('4 GiB')).toEqual({ value: 2 ** 32, error: null });
  });

  it('asks for a unit after a bare number, suggesting some', () => {
    const { value, error } = checkSize('4');
    expect(value).toBeNull();
    expect(error).toBe('4 what? Add a unit: 4 GiB, 4 MiB, 4 TB…');
  });

  it.each([
    ['', 'Enter a size, e.g. 4 GiB'],
    ['-4 GiB', 'Cannot be negative: enter a size such as 4 GiB'],
    ['lots', '“lots” is not a size; use e.g. 512 MiB, 4 GiB or 1 TB'],
    ['0 GiB', 'Must be more than 0, e.g. 4 GiB'],
    ['9000 PiB', 'Too large: at most 8 EiB']
  ])('refuses %p: %s', (text, error) => {
    expect(checkSize(text)).toEqual({ value: null, error });
  });

  it('takes zero only where zero is allowed', () => {
    expect(checkSize('0', { allowZero: true }).value).toBe(0);
    expect(checkSize('0 B', { allowZero: true }).value).toBe(0);
    expect(checkSize('0').value).toBeNull();
  });
});

describe('checkAmount', () => {
  it('reads memory as a size and workers or cores as counts', () => {
    expect(checkAmount('memory', '1 GiB').value).toBe(2 ** 30);
    expect(checkAmount('memory', '0').value).toBe(0);
    expect(checkAmount('cores', '8').value).toBe(8);
    expect(checkAmount('workers', '1 GiB').error).toBe(
      '“1 GiB” is not a number of workers'
    );
  });
});

describe('readNumber', () => {
  it.each([
    ['3', 3],
    ['3.0', 3],
    ['1e3', 1000],
    ['-2', -2],
    [' 7 ', 7]
  ])('reads %p as %d', (text, value) => {
    expect(readNumber(text)).toBe(value);
  });

  it.each(['', 'two', '0x10', '1 GiB', 'Infinity'])('refuses %p', text => {
    expect(readNumber(text)).toBeNull();
  });
});

describe('fieldLabel', () => {
  it.each([
    ['spec.groups[0].count', ['default'], 'Workers of group default'],
    ['spec.groups[1].threads', ['cpu'], 'Threads of group 2'],
    ['spec.groups[0]', ['gpu'], 'Group gpu'],
    ['spec.groups[0].resources.disk', ['io'], 'Resource disk of group io'],
    ['adapt.maximum', [], 'Adaptive maximum'],
    ['scale.memory', [], 'Scale to'],
    ['options.queue_name', [], 'Queue name']
  ])('names %s in the form’s words', (field, groups, label) => {
    expect(fieldLabel(field, groups)).toBe(label);
  });
});

describe('stripField', () => {
  it('drops the field path the server puts in front of a message', () => {
    expect(
      stripField('scale.workers: must be at least 0', 'scale.workers')
    ).toBe('must be at least 0');
    expect(stripField('must be at least 0', 'scale.workers')).toBe(
      'must be at least 0'
    );
    expect(stripField('name: taken', null)).toBe('name: taken');
  });
});
