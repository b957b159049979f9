import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Clipboard,
  Dialog,
  IFrame,
  InputDialog,
  MainAreaWidget,
  Notification,
  showDialog
} from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { insertClientCell } from './clientcell';
import { showNewClusterDialog } from './components/NewClusterDialog';
import { showAdaptiveDialog, showScaleDialog, showSpecDialog } from './dialogs';
import { clusterIcon } from './icons';
import { ClustersModel } from './model';
import { notifyError, tryRequest } from './notify';
import { CommandIDs } from './tokens';
import { ICluster } from './types';

/**
 * User preferences the commands follow (from the settings registry).
 */
export interface IPreferences {
  defaultTemplate: string;
}

/**
 * Add the extension's commands, and the card context menu.
 */
export function addCommands(options: {
  app: JupyterFrontEnd;
  model: ClustersModel;
  sidebarId: string;
  notebooks: INotebookTracker | null;
  preferences: IPreferences;
}): void {
  const { app, model, notebooks, preferences } = options;
  const { commands, shell } = app;

  /**
   * The cluster a command is about: the `clusterId` argument, else the card
   * a context menu was opened on.
   */
  const target = (args: ReadonlyPartialJSONObject): ICluster | undefined => {
    let id = args['clusterId'];
    if (typeof id !== 'string' || !id) {
      id = app.contextMenuHitTest(node => !!node.dataset.clusterId)?.dataset
        .clusterId;
    }
    return typeof id === 'string' ? model.get(id) : undefined;
  };
  const reachable = (args: ReadonlyPartialJSONObject) =>
    !!target(args)?.scheduler_address;

  commands.addCommand(CommandIDs.newCluster, {
    label: 'New Cluster…',
    caption: 'Start a new cluster from one of the server’s templates',
    icon: args => (args['isPalette'] ? undefined : clusterIcon),
    execute: async () => {
      const templates = await tryRequest('Could not load the templates', () =>
        model.listTemplates()
      );
      if (!templates) {
        return null;
      }
      return showNewClusterDialog({
        model,
        templates,
        defaultTemplate: preferences.defaultTemplate,
        onError: error => notifyError('Could not start a cluster', error)
      });
    }
  });

  commands.addCommand(CommandIDs.showSidebar, {
    label: 'Show Clusters Sidebar',
    execute: () => shell.activateById(options.sidebarId)
  });

  if (notebooks) {
    commands.addCommand(CommandIDs.insertClientCell, {
      label: args => {
        const cluster = target(args);
        return cluster
          ? `Insert Client Cell for ${cluster.name}`
          : 'Insert Client Cell for Cluster…';
      },
      caption:
        'Insert a code cell that connects a Dask client to a cluster, below the active cell',
      isEnabled: () =>
        !!notebooks.currentWidget &&
        model.clusters.some(c => !!c.scheduler_address),
      execute: async args => {
        const panel = notebooks.currentWidget;
        if (!panel) {
          return;
        }
        const cluster = target(args) ?? (await chooseCluster(model));
        if (!cluster?.scheduler_address) {
          return;
        }
        if (shell.currentWidget !== panel) {
          shell.activateById(panel.id);
        }
        insertClientCell(panel, cluster.scheduler_address);
      }
    });
  }

  commands.addCommand(CommandIDs.openDashboard, {
    label: 'Open Dashboard',
    caption: 'Open the Dask dashboard in a JupyterLab tab',
    isEnabled: args => !!target(args)?.dashboard_url,
    execute: args => {
      const cluster = target(args);
      if (cluster?.dashboard_url) {
        openDashboard(app, cluster);
      }
    }
  });

  commands.addCommand(CommandIDs.copyAddress, {
    label: 'Copy Scheduler Address',
    caption: 'Copy the scheduler address',
    isEnabled: reachable,
    execute: args => {
      const address = target(args)?.scheduler_address;
      if (address) {
        Clipboard.copyToSystem(address);
        Notification.info(`Copied ${address}`, { autoClose: 3000 });
      }
    }
  });

  commands.addCommand(CommandIDs.scale, {
    label: 'Scale…',
    caption: 'Scale a group in workers, cores or memory',
    isEnabled: reachable,
    execute: args => {
      const cluster = target(args);
      return cluster ? showScaleDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.adapt, {
    label: 'Adaptive Mode…',
    caption: 'Turn adaptive mode on or off and set its range, per group',
    isEnabled: reachable,
    execute: args => {
      const cluster = target(args);
      return cluster ? showAdaptiveDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.editSpec, {
    label: 'Edit Worker Spec…',
    caption: 'Change the worker groups: count, threads, memory, GPUs',
    isEnabled: reachable,
    execute: args => {
      const cluster = target(args);
      return cluster ? showSpecDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.shutdown, {
    label: 'Shut Down…',
    caption: 'Stop the scheduler and all workers of the cluster',
    isEnabled: args => {
      const status = target(args)?.status;
      return !!status && status !== 'stopping'; // a stopped (idle) cluster is removed
    },
    execute: async args => {
      const cluster = target(args);
      if (!cluster) {
        return;
      }
      const result = await showDialog({
        title: `Shut down ${cluster.name}?`,
        body:
          `Its scheduler and ${cluster.workers.requested} worker(s) stop, and ` +
          'clients connected to it lose their data.',
        buttons: [
          Dialog.cancelButton(),
          Dialog.warnButton({ label: 'Shut down' })
        ]
      });
      if (result.button.accept) {
        await tryRequest(`Could not shut down ${cluster.name}`, () =>
          model.shutdownCluster(cluster.id)
        );
      }
    }
  });

  const selector = '.cm-ClusterCard';
  [
    CommandIDs.insertClientCell,
    CommandIDs.openDashboard,
    CommandIDs.copyAddress,
    CommandIDs.scale,
    CommandIDs.adapt,
    CommandIDs.editSpec,
    CommandIDs.shutdown
  ].forEach((command, rank) => {
    if (commands.hasCommand(command)) {
      app.contextMenu.addItem({ command, selector, rank });
    }
  });
}

/**
 * Ask which cluster, when there is more than one to choose from.
 */
async function chooseCluster(
  model: ClustersModel
): Promise<ICluster | undefined> {
  const clusters = model.clusters.filter(c => !!c.scheduler_address);
  if (clusters.length <= 1) {
    return clusters[0];
  }
  const items = clusters.map(c => `${c.name} (${c.scheduler_address})`);
  const result = await InputDialog.getItem({
    title: 'Insert Client cell for cluster',
    label: 'Cluster',
    items
  });
  if (!result.button.accept || result.value === null) {
    return undefined;
  }
  return clusters[items.indexOf(result.value)];
}

/**
 * Open (or show again) a cluster's Dask dashboard in a main-area tab. It is
 * served by this server's authenticated proxy.
 */
function openDashboard(app: JupyterFrontEnd, cluster: ICluster): void {
  const id = `clustermgr-dashboard-${cluster.id}`;
  const open = Array.from(app.shell.widgets('main')).find(w => w.id === id);
  if (open) {
    app.shell.activateById(id);
    return;
  }
  const content = new IFrame({
    sandbox: ['allow-scripts', 'allow-same-origin', 'allow-forms', 'allow-popups']
  });
  // A path on this server (its base URL included).
  content.url = cluster.dashboard_url!;
  const widget = new MainAreaWidget({ content });
  widget.id = id;
  widget.title.label = `Dask ${cluster.name}`;
  widget.title.icon = clusterIcon;
  widget.title.closable = true;
  widget.addClass('cm-Dashboard');
  app.shell.add(widget, 'main');
}
