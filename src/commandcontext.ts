/**
 * What the cluster commands share: the app, the model, and which cluster a
 * command is about (its `clusterId`, the card a context menu was opened on,
 * the card selected in the sidebar, the only cluster, or one the user picks).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { InputDialog } from '@jupyterlab/apputils';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { whyNotScalable } from './cardstate';
import { trans } from './i18n';
import { ClustersModel } from './model';
import { ICluster } from './types';

/**
 * The argument context-menu items carry: only they act on the card the menu
 * was opened on (elsewhere, e.g. in the palette, the selected card counts).
 */
export const FROM_CONTEXT_MENU = 'fromContextMenu';

/**
 * Whether a command can act on a cluster.
 */
export type ClusterTest = (cluster: ICluster) => boolean;

export interface ICommandContext {
  app: JupyterFrontEnd;
  model: ClustersModel;
  /**
   * The cluster a command is about: the `clusterId` argument, else (for the
   * card's context menu) the card the menu was opened on, else the card
   * that has the focus (a shortcut), else the card selected in the sidebar
   * (clicked, or reached with the keyboard).
   */
  target(args: ReadonlyPartialJSONObject): ICluster | undefined;
  /**
   * Whether the command applies: to its target when it has one, else (from
   * the palette, with several clusters and none selected) to any cluster.
   */
  applies(args: ReadonlyPartialJSONObject, usable?: ClusterTest): boolean;
  /**
   * The target, else the cluster the user picks among those `usable` (the
   * only one without asking, the dialog titled `title`); undefined when
   * cancelled or none fits.
   */
  pick(
    args: ReadonlyPartialJSONObject,
    usable?: ClusterTest,
    title?: string
  ): Promise<ICluster | undefined>;
  /**
   * Whether that cluster has a scheduler to talk to.
   */
  reachable(args: ReadonlyPartialJSONObject): boolean;
  /**
   * Whether it can be scaled (running or starting with a scheduler, and its
   * backend allows it).
   */
  scalable(args: ReadonlyPartialJSONObject): boolean;
}

/**
 * A cluster with a scheduler to talk to.
 */
export const hasScheduler: ClusterTest = cluster => !!cluster.scheduler_address;

/**
 * A cluster that can be scaled (a cluster started elsewhere is observed,
 * never scaled).
 */
export const canScale: ClusterTest = cluster =>
  whyNotScalable(cluster) === null;

export function commandContext(
  app: JupyterFrontEnd,
  model: ClustersModel,
  selected: () => string | null = () => null
): ICommandContext {
  const target = (args: ReadonlyPartialJSONObject): ICluster | undefined => {
    let id = args['clusterId'];
    if ((typeof id !== 'string' || !id) && args[FROM_CONTEXT_MENU]) {
      id = app.contextMenuHitTest(node => !!node.dataset.clusterId)?.dataset
        .clusterId;
    }
    if (typeof id === 'string' && id) {
      return model.get(id);
    }
    // A shortcut pressed on a card acts on that card (the palette takes
    // the focus: there, the selected card counts).
    const focused = args['isPalette']
      ? undefined
      : ((document.activeElement as HTMLElement | null)?.closest?.(
          '.cm-ClusterCard'
        ) as HTMLElement | null | undefined);
    const chosen = focused?.dataset.clusterId ?? selected();
    return chosen ? model.get(chosen) : undefined;
  };
  const applies = (
    args: ReadonlyPartialJSONObject,
    usable: ClusterTest = () => true
  ): boolean => {
    const cluster = target(args);
    if (cluster) {
      return usable(cluster);
    }
    // A restored tab or a caller may name a cluster that is gone.
    return typeof args['clusterId'] !== 'string' && model.clusters.some(usable);
  };
  const pick = async (
    args: ReadonlyPartialJSONObject,
    usable: ClusterTest = () => true,
    title?: string
  ): Promise<ICluster | undefined> => {
    const cluster = target(args);
    if (cluster || typeof args['clusterId'] === 'string') {
      return cluster && usable(cluster) ? cluster : undefined;
    }
    return chooseCluster(model.clusters.filter(usable), title);
  };
  return {
    app,
    model,
    target,
    applies,
    pick,
    reachable: args => applies(args, hasScheduler),
    scalable: args => applies(args, canScale)
  };
}

/**
 * The only cluster of `clusters`, else the one the user picks.
 */
export async function chooseCluster(
  clusters: ReadonlyArray<ICluster>,
  title = trans.__('Choose a cluster')
): Promise<ICluster | undefined> {
  if (clusters.length <= 1) {
    return clusters[0];
  }
  const items = clusters.map(c =>
    c.scheduler_address ? `${c.name} (${c.scheduler_address})` : c.name
  );
  const result = await InputDialog.getItem({
    title,
    label: trans.__('Cluster'),
    items
  });
  if (!result.button.accept || result.value === null) {
    return undefined;
  }
  return clusters[items.indexOf(result.value)];
}
