/**
 * Which of a dashboard's individual plots a card offers, in what order and
 * under which names: the plots a Dask user reaches for first, then the rest
 * in named groups sorted by name, without those the cluster cannot feed
 * (GPU plots on a cluster without GPUs). Pure: no DOM, no requests.
 */
import { IPlot } from './dashboard';
import { trans } from './i18n';
import { ICluster } from './types';

/**
 * A named group of plots, in the order they are offered.
 */
export interface IPlotGroup {
  /** The group's key, e.g. "Most used", "Tasks" (`MOST_USED`, `GROUP_ORDER`). */
  name: string;
  /** Its name as shown, in the user's language. */
  label: string;
  plots: IPlot[];
}

/**
 * The plots to offer, and those left out with why.
 */
export interface IArrangedPlots {
  groups: IPlotGroup[];
  /** Plots the cluster cannot feed, e.g. GPU plots without GPUs. */
  hidden: IPlot[];
  /** Why `hidden` are left out, e.g. "no GPUs on this cluster"; null if none are. */
  hiddenReason: string | null;
}

/**
 * What the arrangement depends on about the cluster.
 */
export interface IPlotContext {
  /** Whether any worker has (or any group of its spec asks for) a GPU. */
  gpus: boolean;
}

/** The group of the plots a Dask user expects first, in that order. */
export const MOST_USED = 'Most used';
/** The group of plots that need a GPU. */
export const GPU_GROUP = 'GPU';
/** Where plots this catalogue does not know (a newer Dask) go. */
export const OTHER_GROUP = 'Other';

interface ICatalogEntry {
  label: string;
  group: string;
}

/**
 * The shown name of group `name` (a key of `GROUP_ORDER` or `MOST_USED`), translated.
 */
export function groupLabel(name: string): string {
  const labels: { [name: string]: string } = {
    [MOST_USED]: trans.__('Most used'),
    Tasks: trans.__('Tasks'),
    Memory: trans.__('Memory'),
    Performance: trans.__('Performance'),
    'Network and disk': trans.__('Network and disk'),
    System: trans.__('System'),
    [GPU_GROUP]: trans.__('GPU'),
    [OTHER_GROUP]: trans.__('Other')
  };
  return labels[name] ?? name;
}

/**
 * The groups after "Most used", in the order they are offered.
 */
export const GROUP_ORDER = [
  'Tasks',
  'Memory',
  'Performance',
  'Network and disk',
  'System',
  GPU_GROUP,
  OTHER_GROUP
];

/**
 * The most used plots, by the slug of their path, in the order of the
 * dashboard's status page and of what people open first.
 */
export const MOST_USED_ORDER = [
  'task-stream',
  'progress',
  'workers-memory',
  'nprocessing',
  'graph',
  'cpu',
  'cluster-memory',
  'workers'
];

/**
 * Known plots by the slug of their path (`/individual-<slug>`, or
 * `/statics/individual-<slug>.html`): a readable name, translated when
 * called (after the plugin has set the translator), and a group.
 */
const catalog = (): { [slug: string]: ICatalogEntry } => ({
  'task-stream': { label: trans.__('Task Stream'), group: MOST_USED },
  progress: { label: trans.__('Progress'), group: MOST_USED },
  'workers-memory': { label: trans.__('Workers Memory'), group: MOST_USED },
  nprocessing: { label: trans.__('Task Processing'), group: MOST_USED },
  graph: { label: trans.__('Task Graph'), group: MOST_USED },
  cpu: { label: trans.__('CPU'), group: MOST_USED },
  'cluster-memory': { label: trans.__('Cluster Memory'), group: MOST_USED },
  workers: { label: trans.__('Workers'), group: MOST_USED },

  groups: { label: trans.__('Task Groups Graph'), group: 'Tasks' },
  'group-progress': { label: trans.__('Task Groups Progress'), group: 'Tasks' },
  occupancy: { label: trans.__('Occupancy'), group: 'Tasks' },
  exceptions: { label: trans.__('Exceptions'), group: 'Tasks' },

  'memory-by-key': { label: trans.__('Memory by Key'), group: 'Memory' },
  'workers-memory-timeseries': {
    label: trans.__('Workers Memory over Time'),
    group: 'Memory'
  },

  'fine-performance-metrics': {
    label: trans.__('Fine Performance Metrics'),
    group: 'Performance'
  },
  'compute-time-per-key': {
    label: trans.__('Compute Time per Key'),
    group: 'Performance'
  },
  'aggregate-time-per-action': {
    label: trans.__('Aggregate Time per Action'),
    group: 'Performance'
  },
  profile: { label: trans.__('Profile'), group: 'Performance' },
  'profile-server': {
    label: trans.__('Profile of the Scheduler'),
    group: 'Performance'
  },
  contention: { label: trans.__('Contention'), group: 'Performance' },

  'bandwidth-types': {
    label: trans.__('Bandwidth by Type'),
    group: 'Network and disk'
  },
  'bandwidth-workers': {
    label: trans.__('Bandwidth by Worker'),
    group: 'Network and disk'
  },
  'workers-transfer-bytes': {
    label: trans.__('Workers Transfer Bytes'),
    group: 'Network and disk'
  },
  'workers-network': {
    label: trans.__('Workers Network'),
    group: 'Network and disk'
  },
  'workers-network-timeseries': {
    label: trans.__('Workers Network over Time'),
    group: 'Network and disk'
  },
  'workers-disk': {
    label: trans.__('Workers Disk'),
    group: 'Network and disk'
  },
  'workers-disk-timeseries': {
    label: trans.__('Workers Disk over Time'),
    group: 'Network and disk'
  },

  'workers-cpu-timeseries': {
    label: trans.__('Workers CPU over Time'),
    group: 'System'
  },
  'scheduler-system': { label: trans.__('Scheduler System'), group: 'System' },
  'cluster-map': { label: trans.__('Cluster Map'), group: 'System' },

  'gpu-memory': { label: trans.__('GPU Memory'), group: GPU_GROUP },
  'gpu-utilization': { label: trans.__('GPU Utilization'), group: GPU_GROUP },
  'rmm-memory': { label: trans.__('RMM Memory'), group: GPU_GROUP }
});

/**
 * The catalogue's name of the plot of slug `slug` (e.g. "task-stream" gives
 * "Task Stream"), or null for a plot it does not know.
 */
export function catalogLabel(slug: string): string | null {
  return catalog()[slug]?.label ?? null;
}

/**
 * The slug of an individual plot's path: "/individual-task-stream" and
 * "/statics/individual-cluster-map.html" give "task-stream", "cluster-map".
 */
export function plotSlug(path: string): string {
  const last = path.split('/').filter(Boolean).pop() ?? '';
  return last.replace(/\.html$/, '').replace(/^individual-/, '');
}

/**
 * A readable name for a plot this catalogue does not know: the dashboard's
 * own, with its acronyms in capitals ("Gpu Foo" gives "GPU Foo").
 */
export function fallbackLabel(label: string): string {
  return label
    .replace(/^Individual\s+/, '')
    .replace(/\b(Cpu|Gpu|Rmm|Gil)\b/g, word => word.toUpperCase());
}

/**
 * Whether a cluster has GPUs: its workers advertise some, or its spec asks
 * for some (a group whose workers are still pending).
 */
export function clusterHasGpus(cluster: ICluster): boolean {
  if ((cluster.resources?.gpus ?? 0) > 0) {
    return true;
  }
  return (cluster.spec?.groups ?? []).some(
    group => (group.gpus ?? 0) > 0 || (group.resources?.['GPU'] ?? 0) > 0
  );
}

const byLabel = (a: IPlot, b: IPlot) =>
  a.label.localeCompare(b.label, 'en', { sensitivity: 'base' });

/**
 * The plots of a dashboard as a card offers them: "Most used" first in a
 * fixed order, then the other groups in `GROUP_ORDER`, each sorted by name,
 * empty groups left out; GPU plots hidden when the cluster has no GPUs.
 *
 * Parameters
 * ----------
 * plots
 *     The dashboard's plots, in any order (as `individual-plots.json` gives them).
 * context
 *     What the cluster has.
 */
export function arrangePlots(
  plots: IPlot[],
  context: IPlotContext
): IArrangedPlots {
  const grouped = new Map<string, IPlot[]>();
  const hidden: IPlot[] = [];
  const seen = new Set<string>();
  const catalogued = catalog();
  for (const plot of plots) {
    const slug = plotSlug(plot.path);
    if (seen.has(slug)) {
      continue; // the same plot under two paths: offered once
    }
    seen.add(slug);
    const known = catalogued[slug];
    const named: IPlot = {
      label: known?.label ?? fallbackLabel(plot.label),
      path: plot.path
    };
    const group =
      known?.group ?? (/\bgpu\b/i.test(slug) ? GPU_GROUP : OTHER_GROUP);
    if (group === GPU_GROUP && !context.gpus) {
      hidden.push(named);
      continue;
    }
    grouped.set(group, [...(grouped.get(group) ?? []), named]);
  }
  const groups: IPlotGroup[] = [];
  const mostUsed = grouped.get(MOST_USED);
  if (mostUsed) {
    const rank = (plot: IPlot) => MOST_USED_ORDER.indexOf(plotSlug(plot.path));
    groups.push({
      name: MOST_USED,
      label: groupLabel(MOST_USED),
      plots: [...mostUsed].sort((a, b) => rank(a) - rank(b))
    });
  }
  for (const name of GROUP_ORDER) {
    const members = grouped.get(name);
    if (members) {
      groups.push({
        name,
        label: groupLabel(name),
        plots: [...members].sort(byLabel)
      });
    }
  }
  hidden.sort(byLabel);
  return {
    groups,
    hidden,
    hiddenReason: hidden.length ? trans.__('no GPUs on this cluster') : null
  };
}
