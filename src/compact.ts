/**
 * When the sidebar's cards turn compact: when full cards would not fit the
 * height the sidebar has, whatever their number. Pure: no DOM.
 */

/**
 * Pixels between two cards (`.cm-ClusterList`'s gap).
 */
export const CARD_GAP = 8;

/**
 * Whether `count` full cards of `fullCardHeight` pixels each (measured the
 * last time they were shown in full; null: never yet) overflow `available`
 * pixels. One card is never compact: it has the whole sidebar to scroll in.
 */
export function shouldCompact(
  count: number,
  available: number,
  fullCardHeight: number | null
): boolean {
  if (count < 2 || fullCardHeight === null || available <= 0) {
    return false;
  }
  return count * fullCardHeight + (count - 1) * CARD_GAP > available;
}

/**
 * The mean height of the cards shown, or null when there are none.
 */
export function meanHeight(heights: ReadonlyArray<number>): number | null {
  if (!heights.length) {
    return null;
  }
  return heights.reduce((sum, h) => sum + h, 0) / heights.length;
}
