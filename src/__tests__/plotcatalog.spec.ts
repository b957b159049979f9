/**
 * Which dashboard plots a card offers, in what order, under which names.
 */
import { IPlot } from '../dashboard';
import {
  arrangePlots,
  clusterHasGpus,
  fallbackLabel,
  GPU_GROUP,
  MOST_USED,
  OTHER_GROUP,
  plotSlug
} from '../plotcatalog';
import { ICluster } from '../types';

/**
 * `individual-plots.json` of distributed 2026.8 (33 plots, its own order),
 * as `fetchPlots` turns it into plots.
 */
const DASHBOARD: IPlot[] = Object.entries({
  'Individual Fine Performance Metrics': '/individual-fine-performance-metrics',
  'Individual Progress': '/individual-progress',
  'Individual Bandwidth Workers': '/individual-bandwidth-workers',
  'Individual Workers Cpu Timeseries': '/individual-workers-cpu-timeseries',
  'Individual Compute Time Per Key': '/individual-compute-time-per-key',
  'Individual Rmm Memory': '/individual-rmm-memory',
  'Individual Task Stream': '/individual-task-stream',
  'Individual Scheduler System': '/individual-scheduler-system',
  'Individual Graph': '/individual-graph',
  'Individual Workers Disk': '/individual-workers-disk',
  'Individual Workers Transfer Bytes': '/individual-workers-transfer-bytes',
  'Individual Exceptions': '/individual-exceptions',
  'Individual Bandwidth Types': '/individual-bandwidth-types',
  'Individual Groups': '/individual-groups',
  'Individual Workers Disk Timeseries': '/individual-workers-disk-timeseries',
  'Individual Group Progress': '/individual-group-progress',
  'Individual Cluster Memory': '/individual-cluster-memory',
  'Individual Profile Server': '/individual-profile-server',
  'Individual Profile': '/individual-profile',
  'Individual Workers Memory Timeseries':
    '/individual-workers-memory-timeseries',
  'Individual Contention': '/individual-contention',
  'Individual Workers Network': '/individual-workers-network',
  'Individual Nprocessing': '/individual-nprocessing',
  'Individual Gpu Memory': '/individual-gpu-memory',
  'Individual Gpu Utilization': '/individual-gpu-utilization',
  'Individual Workers Network Timeseries':
    '/individual-workers-network-timeseries',
  'Individual Aggregate Time Per Action':
    '/individual-aggregate-time-per-action',
  'Individual Occupancy': '/individual-occupancy',
  'Individual Workers Memory': '/individual-workers-memory',
  'Individual Memory By Key': '/individual-memory-by-key',
  'Individual Cpu': '/individual-cpu',
  'Individual Workers': '/individual-workers',
  'Individual Cluster Map': '/statics/individual-cluster-map.html'
}).map(([name, path]) => ({ label: name.replace(/^Individual\s+/, ''), path }));

const labels = (plots: IPlot[]) => plots.map(plot => plot.label);
const everyPlot = (arranged: ReturnType<typeof arrangePlots>): IPlot[] =>
  ([] as IPlot[]).concat(...arranged.groups.map(group => group.plots));

describe('arrangePlots', () => {
  it('offers the most used plots first, in the order a Dask user expects', () => {
    // Given the dashboard's plots in its own order, on a cluster without GPUs
    const arranged = arrangePlots(DASHBOARD, { gpus: false });
    // Then the first group is the most used plots, in a fixed order
    expect(arranged.groups[0].name).toBe(MOST_USED);
    expect(labels(arranged.groups[0].plots)).toEqual([
      'Task Stream',
      'Progress',
      'Workers Memory',
      'Task Processing',
      'Task Graph',
      'CPU',
      'Cluster Memory',
      'Workers'
    ]);
  });

  it('groups the rest, each group sorted by name, in a fixed order of groups', () => {
    const arranged = arrangePlots(DASHBOARD, { gpus: false });
    expect(arranged.groups.map(group => group.name)).toEqual([
      MOST_USED,
      'Tasks',
      'Memory',
      'Performance',
      'Network and disk',
      'System'
    ]);
    for (const group of arranged.groups.slice(1)) {
      const names = labels(group.plots);
      expect(names).toEqual(
        [...names].sort((a, b) =>
          a.localeCompare(b, 'en', { sensitivity: 'base' })
        )
      );
    }
    expect(labels(arranged.groups[1].plots)).toEqual([
      'Exceptions',
      'Occupancy',
      'Task Groups Graph',
      'Task Groups Progress'
    ]);
  });

  it('hides the GPU plots of a cluster without GPUs, and says why', () => {
    const arranged = arrangePlots(DASHBOARD, { gpus: false });
    expect(labels(arranged.hidden)).toEqual([
      'GPU Memory',
      'GPU Utilization',
      'RMM Memory'
    ]);
    expect(arranged.hiddenReason).toBe('no GPUs on this cluster');
    expect(everyPlot(arranged)).toHaveLength(DASHBOARD.length - 3);
    expect(labels(everyPlot(arranged)).join(' ')).not.toMatch(/GPU|RMM/i);
  });

  it('offers every plot once, GPU plots included, on a cluster with GPUs', () => {
    const arranged = arrangePlots(DASHBOARD, { gpus: true });
    expect(arranged.hidden).toEqual([]);
    expect(arranged.hiddenReason).toBeNull();
    const offered = everyPlot(arranged);
    expect(offered).toHaveLength(DASHBOARD.length);
    expect(new Set(offered.map(plot => plot.path))).toEqual(
      new Set(DASHBOARD.map(plot => plot.path))
    );
    const gpu = arranged.groups.find(group => group.name === GPU_GROUP);
    expect(labels(gpu!.plots)).toEqual([
      'GPU Memory',
      'GPU Utilization',
      'RMM Memory'
    ]);
  });

  it('keeps plots it does not know under "Other" with readable names, and GPU ones with GPUs', () => {
    const arranged = arrangePlots(
      [
        { label: 'Zeta Gpu Thing', path: '/individual-zeta-gpu-thing' },
        { label: 'Spilled Bytes', path: '/individual-spilled-bytes' },
        { label: 'Task Stream', path: '/individual-task-stream' },
        { label: 'Cpu Steal', path: '/individual-cpu-steal' }
      ],
      { gpus: false }
    );
    expect(arranged.groups.map(group => group.name)).toEqual([
      MOST_USED,
      OTHER_GROUP
    ]);
    expect(labels(arranged.groups[1].plots)).toEqual([
      'CPU Steal',
      'Spilled Bytes'
    ]);
    expect(labels(arranged.hidden)).toEqual(['Zeta GPU Thing']);
  });

  it('offers a plot listed twice once', () => {
    const arranged = arrangePlots(
      [
        { label: 'Progress', path: '/individual-progress' },
        { label: 'Progress', path: '/individual-progress' }
      ],
      { gpus: false }
    );
    expect(everyPlot(arranged)).toHaveLength(1);
  });

  it('offers nothing for a dashboard without plots', () => {
    expect(arrangePlots([], { gpus: true })).toEqual({
      groups: [],
      hidden: [],
      hiddenReason: null
    });
  });
});

describe('plotSlug and fallbackLabel', () => {
  it('names a plot by its path, for Bokeh pages and static pages alike', () => {
    expect(plotSlug('/individual-task-stream')).toBe('task-stream');
    expect(plotSlug('/statics/individual-cluster-map.html')).toBe(
      'cluster-map'
    );
    expect(fallbackLabel('Individual Gpu Rmm Cpu Bars')).toBe(
      'GPU RMM CPU Bars'
    );
  });
});

describe('clusterHasGpus', () => {
  const cluster = (
    gpus: number,
    groups: { gpus: number; resources: { [name: string]: number } }[]
  ) =>
    ({
      resources: { cores: 1, memory: 1, gpus },
      spec: {
        groups: groups.map(g => ({
          name: 'g',
          count: 1,
          threads: 1,
          memory: 1,
          ...g
        }))
      }
    }) as unknown as ICluster;

  it('is true when workers advertise GPUs, or a group asks for them', () => {
    expect(clusterHasGpus(cluster(1, []))).toBe(true);
    expect(clusterHasGpus(cluster(0, [{ gpus: 2, resources: {} }]))).toBe(true);
    expect(
      clusterHasGpus(cluster(0, [{ gpus: 0, resources: { GPU: 1 } }]))
    ).toBe(true);
  });

  it('is false for a cluster with neither', () => {
    expect(
      clusterHasGpus(cluster(0, [{ gpus: 0, resources: { FOO: 1 } }]))
    ).toBe(false);
    expect(clusterHasGpus({} as ICluster)).toBe(false);
  });
});
