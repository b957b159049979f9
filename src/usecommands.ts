/**
 * Commands that use a cluster without changing it: insert a Client cell,
 * copy the scheduler address, open the dashboard, show the event history.
 */
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import {
  Clipboard,
  InputDialog,
  MainAreaWidget,
  Notification,
  WidgetTracker
} from '@jupyterlab/apputils';

import { ICommandContext } from './commandcontext';
import { EventHistory } from './components/EventHistory';
import { STATUS_PATH } from './dashboard';
import { opensElsewhere } from './externaldashboard';
import { clusterIcon } from './icons';
import { findDestination, IInsertTargets, insertClientCode } from './insert';
import { LogViewer, logTabId } from './logviewer';
import { ClustersModel } from './model';
import { CommandIDs } from './tokens';
import { ICluster } from './types';
import { whyNoClient } from './cardstate';

/**
 * The namespace of History tabs in the layout restorer.
 */
const HISTORY_NAMESPACE = 'clustermgr-events';

export function addUseCommands(
  context: ICommandContext,
  targets: IInsertTargets,
  restorer: ILayoutRestorer | null = null
): void {
  const { app, model, target, reachable } = context;
  const { commands, shell } = app;
  const histories = new WidgetTracker<MainAreaWidget<EventHistory>>({
    namespace: HISTORY_NAMESPACE
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
    isEnabled: args => {
      if (!findDestination(shell.currentWidget, targets)) {
        return false;
      }
      const cluster = target(args);
      return cluster
        ? whyNoClient(cluster) === null
        : model.clusters.some(c => whyNoClient(c) === null);
    },
    execute: async args => {
      const destination = findDestination(shell.currentWidget, targets);
      if (!destination) {
        return;
      }
      const cluster = target(args) ?? (await chooseCluster(model));
      if (!cluster?.scheduler_address || whyNoClient(cluster) !== null) {
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
      // A restored tab names its cluster by id and name: the cluster may be
      // gone, or not loaded yet.
      const cluster = target(args);
      const clusterId = cluster?.id ?? args['clusterId'];
      const name = cluster?.name ?? args['clusterName'];
      if (typeof clusterId === 'string' && typeof name === 'string') {
        openEventHistory(app, model, histories, clusterId, name);
      }
    }
  });
  if (restorer) {
    void restorer.restore(histories, {
      command: CommandIDs.showEvents,
      args: widget => ({
        clusterId: widget.content.clusterId,
        clusterName: widget.content.clusterName
      }),
      name: widget => widget.content.clusterId
    });
  }

  commands.addCommand(CommandIDs.showLogs, {
    label: 'Logs',
    caption:
      "The scheduler's and each worker's log, in a tab: follow, search, download",
    isEnabled: args => !!target(args),
    execute: args => {
      const cluster = target(args);
      if (cluster) {
        openLogs(app, model, cluster, args.name as string | undefined);
      }
    }
  });

  commands.addCommand(CommandIDs.openDashboard, {
    label: 'Open Dashboard',
    caption: 'Open the Dask dashboard in a JupyterLab tab',
    isEnabled: args => !!target(args)?.dashboard_url,
    execute: args => {
      const cluster = target(args);
      if (cluster?.dashboard_url && opensElsewhere(cluster.dashboard_url)) {
        window.open(cluster.dashboard_url, '_blank', 'noopener'); // a gateway's dashboard route
      } else if (cluster?.dashboard_url) {
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
 * The cluster to connect to: the only one that has a scheduler, else the one
 * the user picks.
 */
async function chooseCluster(
  model: ClustersModel
): Promise<ICluster | undefined> {
  const clusters = model.clusters.filter(c => whyNoClient(c) === null);
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
 * Open (or show again) a cluster's event history in a main-area tab.
 */
function openEventHistory(
  app: JupyterFrontEnd,
  model: ClustersModel,
  tracker: WidgetTracker<MainAreaWidget<EventHistory>>,
  clusterId: string,
  clusterName: string
): void {
  const id = `clustermgr-events-${clusterId}`;
  const open = Array.from(app.shell.widgets('main')).find(w => w.id === id);
  if (open) {
    app.shell.activateById(id);
    return;
  }
  const content = new EventHistory({ model, clusterId, clusterName });
  const widget = new MainAreaWidget({ content });
  widget.id = id;
  widget.title.label = `History ${clusterName}`;
  widget.title.icon = clusterIcon;
  widget.title.closable = true;
  void tracker.add(widget);
  app.shell.add(widget, 'main');
}

/**
 * Open (or show again) a cluster's logs in a main-area tab, showing log
 * `name` when given.
 */
function openLogs(
  app: JupyterFrontEnd,
  model: ClustersModel,
  cluster: ICluster,
  name?: string
): void {
  const id = logTabId(cluster.id);
  const open = Array.from(app.shell.widgets('main')).find(w => w.id === id);
  if (open) {
    const viewer = (open as MainAreaWidget<LogViewer>).content;
    if (name && viewer.logName !== name) {
      void viewer.showLog(name);
    }
    app.shell.activateById(id);
    return;
  }
  const content = new LogViewer({
    settings: model.serverSettings,
    clusterId: cluster.id,
    name
  });
  const widget = new MainAreaWidget({ content });
  widget.id = id;
  widget.title.label = `Logs ${cluster.name}`;
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
