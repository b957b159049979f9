/**
 * When the sidebar's cards are compact: when the user asks (the
 * `compactCards` setting, or the sidebar header's toggle), or above
 * `COMPACT_ABOVE` clusters. Never by the height the sidebar has, so the
 * layout never switches under the pointer. Pure: no DOM.
 */

/**
 * Above this many clusters listed, the cards are compact.
 */
export const COMPACT_ABOVE = 4;

/**
 * Whether `count` cards are shown compact, `asked` being the user's choice.
 */
export function shouldCompact(count: number, asked: boolean): boolean {
  return asked || count > COMPACT_ABOVE;
}
