/**
 * Commands that use a cluster without changing it: insert a Client cell,
 * copy the scheduler address, open the dashboard, show the event history.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Clipboard,
  InputDialog,
  MainAreaWidget,
  Notification
} from '@jupyterlab/apputils';

import { ICommandContext } from './commandcontext';
import { EventHistory } from './components/EventHistory';
import { STATUS_PATH } from './dashboard';
import { clusterIcon } from './icons';
import { findDestination, IInsertTargets, insertClientCode } from './insert';
import { ClustersModel } from './model';
import { CommandIDs } from './tokens';
import { ICluster } from './types';

export function addUseCommands(
  context: ICommandContext,
  targets: IInsertTargets
): void {
  const { app, model, target, reachable } = context;
  const { commands, shell } = app;

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
      insertClientCode(destination, cluster);
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
