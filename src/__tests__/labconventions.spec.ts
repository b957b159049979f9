/**
 * The pure parts of the JupyterLab conventions: strings through the
 * translator set on activation, the status-bar words, and the order the
 * defaultLayout setting's plots open in.
 */
import type { ITranslator } from '@jupyterlab/translation';

import { ENGLISH, setTranslator, trans } from '../i18n';
import { layoutOrder, layoutSlug } from '../layout';
import { statusSummary } from '../statussummary';
import { ICluster } from '../types';

function cluster(status: string, running: number): ICluster {
  return { status, workers: { running } } as unknown as ICluster;
}

describe('translation', () => {
  afterEach(() => setTranslator(null));

  it('goes through the translator the plugin was given', () => {
    // Given a translator that marks what it translates
    const translator: ITranslator = {
      languageCode: 'xx',
      load: domain => {
        const inner = ENGLISH;
        return {
          ...inner,
          __: (msgid: string, ...args: any[]) =>
            `[${domain}] ${inner.__(msgid, ...args)}`,
          _n: (msgid: string, plural: string, n: number, ...args: any[]) =>
            `[${domain}] ${inner._n(msgid, plural, n, ...args)}`
        };
      }
    };
    // When it is set, Then every string says so, in the package's domain
    setTranslator(translator);
    expect(trans.__('Scale…')).toBe('[clustermgr_lab] Scale…');
    expect(statusSummary([cluster('running', 2)])).toBe(
      '[clustermgr_lab] [clustermgr_lab] 1 cluster · [clustermgr_lab] 2 workers'
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
