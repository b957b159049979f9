import { COMPACT_ABOVE, shouldCompact } from '../compact';

describe('shouldCompact', () => {
  it('keeps full cards up to the documented count (four), whatever the height', () => {
    // Given no choice of the user
    // Then two, three and four clusters have full cards
    expect(COMPACT_ABOVE).toBe(4);
    for (const count of [1, 2, 3, 4]) {
      expect(shouldCompact(count, false)).toBe(false);
    }
  });

  it('turns compact above four clusters', () => {
    expect(shouldCompact(5, false)).toBe(true);
    expect(shouldCompact(40, false)).toBe(true);
  });

  it('is compact whenever the user asks, even for one cluster', () => {
    expect(shouldCompact(1, true)).toBe(true);
    expect(shouldCompact(2, true)).toBe(true);
  });
});
