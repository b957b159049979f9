import { formatIdleTimeout, parseIdleTimeout } from '../duration';

describe('parseIdleTimeout', () => {
  it('reads durations as a person writes them', () => {
    expect(parseIdleTimeout('30 min')).toBe(1800);
    expect(parseIdleTimeout('1.5h')).toBe(5400);
    expect(parseIdleTimeout('90 s')).toBe(90);
    expect(parseIdleTimeout('2 days')).toBe(172800);
    expect(parseIdleTimeout('45')).toBe(2700); // minutes
  });

  it('reads "off" (and nothing) as no idle shutdown', () => {
    for (const off of ['', ' off ', 'never', '0']) {
      expect(parseIdleTimeout(off)).toBeNull();
    }
  });

  it('says what is wrong with text that does not read', () => {
    expect(() => parseIdleTimeout('soon')).toThrow(
      '"soon" is not a duration: write e.g. 30 min, 2 h or off'
    );
    expect(() => parseIdleTimeout('3 weeks')).toThrow(
      '"weeks" is not a unit: use s, min, h or d'
    );
  });
});

describe('formatIdleTimeout', () => {
  it('shows the largest whole unit, or off', () => {
    expect(formatIdleTimeout(7200)).toBe('2 h');
    expect(formatIdleTimeout(1800)).toBe('30 min');
    expect(formatIdleTimeout(90)).toBe('90 s');
    expect(formatIdleTimeout(null)).toBe('off');
  });
});
