/**
 * The `defaultLayout` setting: which dashboard plots open, and where, with a
 * cluster's dashboard (dask-labextension's setting of the same name and
 * shape), and the order they open in. Pure: no DOM, no server (the Open
 * Dashboard command opens them).
 */
import { plotSlug } from './plotcatalog';

/**
 * Where a plot's tab goes: `mode` relative to the tab of plot `ref`, or to
 * the cluster's Dashboard tab when `ref` is empty.
 */
export interface ILayoutEntry {
  mode?:
    | 'split-top'
    | 'split-left'
    | 'split-right'
    | 'split-bottom'
    | 'tab-before'
    | 'tab-after';
  ref?: string | null;
}

/**
 * Plots by name ("task-stream", "individual-task-stream" or
 * "/individual-task-stream" all name the same plot).
 */
export interface IDashboardLayout {
  [plot: string]: ILayoutEntry;
}

/**
 * A plot's name in a layout, as a slug ("individual-task-stream" gives
 * "task-stream").
 */
export function layoutSlug(name: string): string {
  return plotSlug(name.startsWith('/') ? name : `/${name}`);
}

/**
 * The layout's plots in an order where each one's `ref` is opened before it
 * (a `ref` to a plot the layout does not open, or a cycle, counts as none).
 */
export function layoutOrder(
  layout: IDashboardLayout
): Array<{ slug: string; entry: ILayoutEntry; ref: string | null }> {
  const entries = new Map<string, ILayoutEntry>();
  for (const [name, entry] of Object.entries(layout)) {
    entries.set(layoutSlug(name), entry ?? {});
  }
  const order: Array<{
    slug: string;
    entry: ILayoutEntry;
    ref: string | null;
  }> = [];
  const placed = new Set<string>();
  const visiting = new Set<string>();
  const visit = (slug: string): boolean => {
    if (placed.has(slug)) {
      return true;
    }
    if (visiting.has(slug) || !entries.has(slug)) {
      return false;
    }
    visiting.add(slug);
    const entry = entries.get(slug)!;
    const wanted = entry.ref ? layoutSlug(entry.ref) : null;
    const ref = wanted && visit(wanted) ? wanted : null;
    visiting.delete(slug);
    placed.add(slug);
    order.push({ slug, entry, ref });
    return true;
  };
  for (const slug of entries.keys()) {
    visit(slug);
  }
  return order;
}
