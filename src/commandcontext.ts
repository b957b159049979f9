/**
 * What the cluster commands share: the app, the model, and which cluster a
 * command is about (its `clusterId`, or the card a context menu was opened on).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { whyNotScalable } from './cardstate';
import { ClustersModel } from './model';
import { ICluster } from './types';

/**
 * The argument context-menu items carry: only they act on the card the menu
 * was opened on (elsewhere, e.g. in the palette, a command asks).
 */
export const FROM_CONTEXT_MENU = 'fromContextMenu';

export interface ICommandContext {
  app: JupyterFrontEnd;
  model: ClustersModel;
  /**
   * The cluster a command is about: the `clusterId` argument, else (only for
   * the card's context menu) the card the menu was opened on.
   */
  target(args: ReadonlyPartialJSONObject): ICluster | undefined;
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

export function commandContext(
  app: JupyterFrontEnd,
  model: ClustersModel
): ICommandContext {
  const target = (args: ReadonlyPartialJSONObject): ICluster | undefined => {
    let id = args['clusterId'];
    if ((typeof id !== 'string' || !id) && args[FROM_CONTEXT_MENU]) {
      id = app.contextMenuHitTest(node => !!node.dataset.clusterId)?.dataset
        .clusterId;
    }
    return typeof id === 'string' ? model.get(id) : undefined;
  };
  const reachable = (args: ReadonlyPartialJSONObject) =>
    !!target(args)?.scheduler_address;
  // A cluster started elsewhere is observed, never scaled.
  const scalable = (args: ReadonlyPartialJSONObject) => {
    const cluster = target(args);
    return !!cluster && whyNotScalable(cluster) === null;
  };
  return { app, model, target, reachable, scalable };
}
