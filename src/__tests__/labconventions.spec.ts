/**
 * The pure parts of the JupyterLab conventions: strings through the
 * translator set on activation, the status-bar words, and the order the
 * defaultLayout setting's plots open in.
 */
import type { ITranslator } from '@jupyterlab/translation';

import schema from '../../schema/plugin.json';

import { statusWord } from '../cardstate';
import { formatMemoryUsage, formatUsage } from '../format';
import { ENGLISH, setTranslator, trans, TRANSLATION_DOMAIN } from '../i18n';
import { layoutOrder, layoutSlug } from '../layout';
import { arrangePlots, MOST_USED } from '../plotcatalog';
import { statusSummary } from '../statussummary';
import { ICluster } from '../types';

function cluster(status: string, running: number): ICluster {
  return { status, workers: { running } } as unknown as ICluster;
}

/**
 * A translator that marks what it translates with the domain, as a language
 * pack would change it.
 */
const MARKING: ITranslator = {
  languageCode: 'xx',
  load: domain => ({
    ...ENGLISH,
    __: (msgid: string, ...args: any[]) =>
      `[${domain}] ${ENGLISH.__(msgid, ...args)}`,
    _n: (msgid: string, plural: string, n: number, ...args: any[]) =>
      `[${domain}] ${ENGLISH._n(msgid, plural, n, ...args)}`,
    _p: (msgctxt: string, msgid: string, ...args: any[]) =>
      `[${domain}:${msgctxt}] ${ENGLISH._p(msgctxt, msgid, ...args)}`
  })
};

describe('translation', () => {
  afterEach(() => setTranslator(null));

  it('goes through the translator the plugin was given', () => {
    // Given a translator that marks what it translates
    // When it is set, Then every string says so, in the package's domain
    setTranslator(MARKING);
    expect(trans.__('Scale…')).toBe('[clustermgr_lab] Scale…');
    expect(statusSummary([cluster('running', 2)])).toBe(
      '[clustermgr_lab] [clustermgr_lab] 1 cluster · [clustermgr_lab] 2 workers'
    );
  });

  it('names the dashboard plots and their groups in the user language, keeping the group keys', () => {
    // Given a language pack for the extension's domain
    setTranslator(MARKING);
    // When a dashboard's plots are arranged
    const arranged = arrangePlots(
      [
        { label: 'Individual Task Stream', path: '/individual-task-stream' },
        { label: 'Individual Gpu Memory', path: '/individual-gpu-memory' }
      ],
      { gpus: false }
    );
    // Then the names shown are translated, the keys the code compares are not
    expect(arranged.groups[0].name).toBe(MOST_USED);
    expect(arranged.groups[0].label).toBe('[clustermgr_lab] Most used');
    expect(arranged.groups[0].plots[0].label).toBe(
      '[clustermgr_lab] Task Stream'
    );
    expect(arranged.hiddenReason).toBe(
      '[clustermgr_lab] no GPUs on this cluster'
    );
  });

  it("shows a cluster's status in the user language", () => {
    setTranslator(MARKING);
    expect(statusWord('running')).toBe(
      '[clustermgr_lab:cluster status] running'
    );
    expect(statusWord('refused')).toBe(
      '[clustermgr_lab:cluster status] refused'
    );
  });

  it('words usage amounts in the user language, units included', () => {
    setTranslator(MARKING);
    expect(formatUsage(40, 'core')).toBe('[clustermgr_lab] 40 core-seconds');
    expect(formatUsage(750, 'GPU')).toBe('[clustermgr_lab] 12.5 GPU-minutes');
    expect(formatMemoryUsage(1.5 * 2 ** 30 * 3600)).toBe(
      '[clustermgr_lab] 1.5 GiB-hours'
    );
  });

  it("has the settings schema's titles translated in the extension's domain", () => {
    // jupyterlab_server translates a schema's titles, descriptions and menu
    // labels in the domain its "jupyter.lab.internationalization" names.
    expect(schema['jupyter.lab.internationalization'].domain).toBe(
      TRANSLATION_DOMAIN
    );
  });

  it('is English before activation', () => {
    expect(trans.__('Copied %1', 'tcp://a:1')).toBe('Copied tcp://a:1');
  });
});

describe('statusSummary', () => {
  it('counts clusters up and their running workers', () => {
    expect(
      statusSummary([
        cluster('running', 3),
        cluster('pending', 0),
        cluster('failed', 0),
        cluster('stopped', 0)
      ])
    ).toBe('2 clusters · 3 workers');
    expect(statusSummary([])).toBe('0 clusters · 0 workers');
  });
});

describe('layoutOrder', () => {
  it('opens each plot after the one it is placed against', () => {
    // Given dask-labextension's default layout, written in any order
    const order = layoutOrder({
      'individual-progress': {
        mode: 'split-right',
        ref: 'individual-workers-memory'
      },
      'individual-workers-memory': {
        mode: 'split-bottom',
        ref: 'individual-task-stream'
      },
      'individual-task-stream': { mode: 'split-right', ref: null }
    });
    expect(order.map(o => [o.slug, o.ref])).toEqual([
      ['task-stream', null],
      ['workers-memory', 'task-stream'],
      ['progress', 'workers-memory']
    ]);
  });

  it('places a plot against the dashboard when its ref is unknown or a cycle', () => {
    const order = layoutOrder({
      a: { ref: 'b' },
      b: { ref: 'a' },
      c: { mode: 'tab-after', ref: 'nowhere' }
    });
    expect(order.map(o => o.slug).sort()).toEqual(['a', 'b', 'c']);
    expect(order.find(o => o.slug === 'c')?.ref).toBeNull();
    expect(order.filter(o => o.ref === null).length).toBeGreaterThan(1);
  });

  it('reads the names dask-labextension uses', () => {
    expect(layoutSlug('individual-task-stream')).toBe('task-stream');
    expect(layoutSlug('/individual-task-stream')).toBe('task-stream');
    expect(layoutSlug('task-stream')).toBe('task-stream');
  });
});
