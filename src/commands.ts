import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Clipboard,
  Dialog,
  InputDialog,
  MainAreaWidget,
  Notification,
  showDialog
} from '@jupyterlab/apputils';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { EventHistory } from './components/EventHistory';
import { STATUS_PATH } from './dashboard';
import { showNewClusterDialog } from './components/NewClusterDialog';
import { showAdaptiveDialog, showScaleDialog, showSpecDialog } from './dialogs';
import { clusterIcon } from './icons';
import { ClustersModel } from './model';
import { findDestination, IInsertTargets, insertClientCode } from './insert';
import { tryRequest } from './notify';
import { CommandIDs } from './tokens';
import { plural } from './format';
import { ICluster } from './types';

/**
 * The argument context-menu items carry: only they act on the card the menu
 * was opened on (elsewhere, e.g. in the palette, a command asks).
 */
const FROM_CONTEXT_MENU = 'fromContextMenu';

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
  targets: IInsertTargets;
  preferences: IPreferences;
}): void {
  const { app, model, targets, preferences } = options;
  const { commands, shell } = app;

  /**
   * The cluster a command is about: the `clusterId` argument, else (only for
   * the card's context menu) the card the menu was opened on.
   */
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
  const scalable = (args: ReadonlyPartialJSONObject) =>
    reachable(args) && target(args)?.backend !== 'external';

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
        defaultTemplate: preferences.defaultTemplate
      });
    }
  });

  commands.addCommand(CommandIDs.showSidebar, {
    label: 'Show Clusters Sidebar',
    caption: 'Show the Dask clusters sidebar and move the focus into it',
    // The sidebar moves the focus into itself when activated; the command
    // palette hands the focus back when it closes, so activate once more then.
    execute: () => {
      shell.activateById(options.sidebarId);
      setTimeout(() => shell.activateById(options.sidebarId), 100);
    }
  });

  commands.addCommand(CommandIDs.insertClientCell, {
    label: args => {
      const cluster = target(args);
      return cluster
        ? `Insert Client Cell for ${cluster.name}`
        : 'Insert Client Cell for Cluster…';
    },
    caption:
      'Insert code that connects a Dask client to a cluster: a cell below the ' +
      'active one in a notebook, the prompt of a console, or the cursor in a file',
    isEnabled: () =>
      !!findDestination(shell.currentWidget, targets) &&
      model.clusters.some(c => !!c.scheduler_address),
    execute: async args => {
      const destination = findDestination(shell.currentWidget, targets);
      if (!destination) {
        return;
      }
      const cluster = target(args) ?? (await chooseCluster(model));
      if (!cluster?.scheduler_address) {
        return;
      }
      if (shell.currentWidget !== destination.widget) {
        shell.activateById(destination.widget.id);
      }
      insertClientCode(destination, cluster.scheduler_address);
    }
  });

  commands.addCommand(CommandIDs.showEvents, {
    label: 'Event History',
    caption: 'Every lifecycle change and scaling decision, with its reason',
    isEnabled: args => !!target(args),
    execute: args => {
      const cluster = target(args);
      if (cluster) {
        openEventHistory(app, model, cluster);
      }
    }
  });

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
    isEnabled: scalable,
    execute: args => {
      const cluster = target(args);
      return cluster ? showScaleDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.adapt, {
    label: 'Adaptive Mode…',
    caption: 'Turn adaptive mode on or off and set its range, per group',
    isEnabled: scalable,
    execute: args => {
      const cluster = target(args);
      return cluster ? showAdaptiveDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.editSpec, {
    label: 'Edit Worker Spec…',
    caption: 'Change the worker groups: count, threads, memory, GPUs',
    isEnabled: scalable,
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
      const external = cluster.backend === 'external';
      const result = await showDialog({
        title: `${external ? 'Detach' : 'Shut down'} ${cluster.name}?`,
        body: external
          ? 'It leaves this list; its scheduler and workers keep running where they were started.'
          : `Its scheduler and ${plural(cluster.workers.requested, 'worker')} stop, and ` +
            'clients connected to it lose their data.',
        buttons: [
          Dialog.cancelButton(),
          Dialog.warnButton({ label: external ? 'Detach' : 'Shut down' })
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
    CommandIDs.showEvents,
    CommandIDs.shutdown
  ].forEach((command, rank) => {
    if (commands.hasCommand(command)) {
      app.contextMenu.addItem({
        command,
        selector,
        rank,
        args: { [FROM_CONTEXT_MENU]: true }
      });
    }
  });
}


/**
 * Ask which cluster (even when there is one: the user sees what is inserted).
 */
async function chooseCluster(
  model: ClustersModel
): Promise<ICluster | undefined> {
  const clusters = model.clusters.filter(c => !!c.scheduler_address);
  if (clusters.length === 0) {
    return undefined;
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
 * Open (or show again) a cluster's event history in a main-area tab.
 */
function openEventHistory(
  app: JupyterFrontEnd,
  model: ClustersModel,
  cluster: ICluster
): void {
  const id = `clustermgr-events-${cluster.id}`;
  const open = Array.from(app.shell.widgets('main')).find(w => w.id === id);
  if (open) {
    app.shell.activateById(id);
    return;
  }
  const content = new EventHistory({ model, clusterId: cluster.id });
  const widget = new MainAreaWidget({ content });
  widget.id = id;
  widget.title.label = `History ${cluster.name}`;
  widget.title.icon = clusterIcon;
  widget.title.closable = true;
  app.shell.add(widget, 'main');
}

/**
 * Open (or show again) a cluster's Dask dashboard in a main-area tab. It is
 * served by this server's authenticated proxy.
 */
function openDashboard(app: JupyterFrontEnd, cluster: ICluster): void {
  void app.commands.execute(CommandIDs.openPlot, {
    clusterId: cluster.id,
    path: STATUS_PATH,
    label: 'Dashboard'
  });
}
