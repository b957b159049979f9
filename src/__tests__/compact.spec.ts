import { meanHeight, shouldCompact } from '../compact';

describe('shouldCompact', () => {
  it('keeps full cards while they fit the sidebar', () => {
    // Given cards of 250 px in a sidebar with 800 px for them
    expect(shouldCompact(3, 800, 250)).toBe(false); // 3 × 250 + 2 × 8 = 766
    expect(shouldCompact(4, 800, 250)).toBe(true);
  });

  it('follows the height, not a count: three tall cards in a short sidebar are compact', () => {
    expect(shouldCompact(3, 500, 250)).toBe(true);
    expect(shouldCompact(6, 2000, 250)).toBe(false);
  });

  it('never compacts a single card, nor before any card was measured', () => {
    expect(shouldCompact(1, 100, 250)).toBe(false);
    expect(shouldCompact(5, 500, null)).toBe(false);
    expect(shouldCompact(5, 0, 250)).toBe(false);
  });
});

describe('meanHeight', () => {
  it('is the mean of the heights shown, or null without cards', () => {
    expect(meanHeight([200, 300])).toBe(250);
    expect(meanHeight([])).toBeNull();
  });
});
