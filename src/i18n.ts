/**
 * The extension's translation bundle: every user-visible string goes through
 * `trans.__()` (or `_n`, `_p`), the bundle of JupyterLab's `ITranslator` once
 * the plugin is activated, and the untranslated one before (in unit tests).
 */
import type { ITranslator, TranslationBundle } from '@jupyterlab/translation';

/**
 * The translation domain of the extension (its Python package's name, as
 * JupyterLab's language packs expect).
 */
export const TRANSLATION_DOMAIN = 'clustermgr_lab';

/**
 * `%1`, `%2`... of `text` replaced by `args`, `%%` by `%` (as JupyterLab's
 * `Gettext.strfmt`).
 */
function fill(text: string, args: any[]): string {
  return text
    .replace(/%%/g, '%% ')
    .replace(/%(\d+)/g, (whole, n) => String(args[Number(n) - 1]))
    .replace(/%% /g, '%');
}

/**
 * The untranslated bundle: what `nullTranslator` gives, without importing
 * `@jupyterlab/translation` at run time (an ES module Jest does not load).
 */
export const ENGLISH: TranslationBundle = {
  __: (msgid, ...args) => fill(msgid, args),
  _n: (msgid, plural, n, ...args) =>
    fill(n === 1 ? msgid : plural, [n, ...args]),
  _p: (msgctxt, msgid, ...args) => fill(msgid, args),
  _np: (msgctxt, msgid, plural, n, ...args) =>
    fill(n === 1 ? msgid : plural, [n, ...args]),
  gettext: (msgid, ...args) => fill(msgid, args),
  ngettext: (msgid, plural, n, ...args) =>
    fill(n === 1 ? msgid : plural, [n, ...args]),
  pgettext: (msgctxt, msgid, ...args) => fill(msgid, args),
  npgettext: (msgctxt, msgid, plural, n, ...args) =>
    fill(n === 1 ? msgid : plural, [n, ...args]),
  dcnpgettext: (domain, msgctxt, msgid, plural, n, ...args) =>
    fill(n === 1 ? msgid : plural, [n, ...args])
};

let current: TranslationBundle = ENGLISH;

/**
 * Use `translator`'s bundle from now on (called once, on activation; null:
 * English).
 */
export function setTranslator(translator: ITranslator | null): void {
  current = translator ? translator.load(TRANSLATION_DOMAIN) : ENGLISH;
}

/**
 * The bundle every module translates with. It hands each call to the bundle
 * of the translator set last, so modules keep one import and pure modules
 * stay testable without a JupyterLab application.
 */
export const trans: TranslationBundle = {
  __: (msgid: string, ...args: any[]) => current.__(msgid, ...args),
  _n: (msgid: string, msgid_plural: string, n: number, ...args: any[]) =>
    current._n(msgid, msgid_plural, n, ...args),
  _p: (msgctxt: string, msgid: string, ...args: any[]) =>
    current._p(msgctxt, msgid, ...args),
  _np: (
    msgctxt: string,
    msgid: string,
    msgid_plural: string,
    n: number,
    ...args: any[]
  ) => current._np(msgctxt, msgid, msgid_plural, n, ...args),
  gettext: (msgid: string, ...args: any[]) => current.gettext(msgid, ...args),
  ngettext: (msgid: string, msgid_plural: string, n: number, ...args: any[]) =>
    current.ngettext(msgid, msgid_plural, n, ...args),
  pgettext: (msgctxt: string, msgid: string, ...args: any[]) =>
    current.pgettext(msgctxt, msgid, ...args),
  npgettext: (
    msgctxt: string,
    msgid: string,
    msgid_plural: string,
    n: number,
    ...args: any[]
  ) => current.npgettext(msgctxt, msgid, msgid_plural, n, ...args),
  dcnpgettext: (
    domain: string,
    msgctxt: string,
    msgid: string,
    msgid_plural: string,
    n: number,
    ...args: any[]
  ) => current.dcnpgettext(domain, msgctxt, msgid, msgid_plural, n, ...args)
};
