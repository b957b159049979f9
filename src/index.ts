import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, showErrorMessage } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { insertClientCell } from './clientcell';
import { ClustersModel } from './model';
import { ClusterSidebar } from './sidebar';
import { ICluster } from './types';

export { ClustersModel } from './model';
export { ClusterManagerError, requestAPI } from './request';
export * from './types';

/**
 * Command ids.
 */
export namespace CommandIDs {
  export const insertClientCell = 'clustermgr:insert-client-cell';
  export const newCluster = 'clustermgr:new-cluster';
  export const showSidebar = 'clustermgr:show-sidebar';
}

const PALETTE_CATEGORY = 'Clusters';

/**
 * Pick the cluster a command is about: the given id, else the only
 * cluster with a scheduler address, else the first running one.
 */
function pickCluster(
  model: ClustersModel,
  args: ReadonlyPartialJSONObject
): ICluster | undefined {
  const id = args['clusterId'];
  if (typeof id === 'string' && id) {
    return model.get(id);
  }
  const reachable = model.clusters.filter(c => !!c.scheduler_address);
  return reachable.find(c => c.status === 'running') ?? reachable[0];
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'clustermgr-lab:plugin',
  description: 'A sidebar to manage Dask clusters run by the Jupyter server.',
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette, INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    notebooks: INotebookTracker | null
  ) => {
    const { commands, shell } = app;
    const model = new ClustersModel({
      serverSettings: app.serviceManager.serverSettings
    });

    const sidebar = new ClusterSidebar({
      model,
      onInsertClientCell: notebooks
        ? cluster =>
            void commands.execute(CommandIDs.insertClientCell, {
              clusterId: cluster.id
            })
        : undefined
    });
    shell.add(sidebar, 'left', { rank: 200 });
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
    }
    model.start();

    commands.addCommand(CommandIDs.newCluster, {
      label: 'New Cluster',
      caption: 'Start a new cluster with the first template',
      execute: async () => {
        try {
          return await sidebar.newCluster();
        } catch (error) {
          void showErrorMessage(
            'Could not start a cluster',
            (error as Error).message
          );
        }
      }
    });

    commands.addCommand(CommandIDs.showSidebar, {
      label: 'Show Clusters Sidebar',
      execute: () => shell.activateById(sidebar.id)
    });

    if (notebooks) {
      commands.addCommand(CommandIDs.insertClientCell, {
        label: args => {
          const cluster = pickCluster(model, args);
          return cluster
            ? `Insert Client Cell for ${cluster.name}`
            : 'Insert Client Cell';
        },
        caption:
          'Insert a code cell that connects a Dask client to a cluster, below the active cell',
        isEnabled: args => {
          const cluster = pickCluster(model, args);
          return !!(notebooks.currentWidget && cluster?.scheduler_address);
        },
        execute: args => {
          const panel = notebooks.currentWidget;
          const cluster = pickCluster(model, args);
          if (!panel || !cluster?.scheduler_address) {
            return;
          }
          if (shell.currentWidget !== panel) {
            shell.activateById(panel.id);
          }
          insertClientCell(panel, cluster.scheduler_address);
        }
      });
    }

    if (palette) {
      palette.addItem({
        command: CommandIDs.newCluster,
        category: PALETTE_CATEGORY
      });
      palette.addItem({
        command: CommandIDs.showSidebar,
        category: PALETTE_CATEGORY
      });
      if (notebooks) {
        palette.addItem({
          command: CommandIDs.insertClientCell,
          category: PALETTE_CATEGORY
        });
      }
    }
  }
};

export default plugin;
