/**
 * Commands that use a cluster without changing it: insert a Client cell,
 * copy the scheduler address, open the dashboard, show the event history.
 */
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import { CommandRegistry } from '@lumino/commands';
import {
  Clipboard,
  InputDialog,
  MainAreaWidget,
  Notification,
  WidgetTracker
} from '@jupyterlab/apputils';

import { hasScheduler, ICommandContext } from './commandcontext';
import { EventHistory } from './components/EventHistory';
import { dashboardTabId, IPlot, STATUS_PATH } from './dashboard';
import { opensElsewhere } from './externaldashboard';
import { clusterIcon } from './icons';
import { trans } from './i18n';
import { findDestination, IInsertTargets, insertClientCode } from './insert';
import { errorMessage } from './notify';
import { IDashboardLayout, layoutOrder } from './layout';
import { LogViewer, logTabId } from './logviewer';
import { ClustersModel } from './model';
import {
  arrangePlots,
  catalogLabel,
  clusterHasGpus,
  plotSlug
} from './plotcatalog';
import { CommandIDs } from './tokens';
import { ICluster } from './types';
import { whyNoClient } from './cardstate';

/**
 * A cluster a Client can connect to.
 */
const connectable = (cluster: ICluster) => whyNoClient(cluster) === null;

/**
 * A cluster whose dashboard can be shown.
 */
const withDashboard = (cluster: ICluster) => !!cluster.dashboard_url;

/**
 * The namespace of History tabs in the layout restorer.
 */
const HISTORY_NAMESPACE = 'clustermgr-events';

export function addUseCommands(
  context: ICommandContext,
  targets: IInsertTargets,
  restorer: ILayoutRestorer | null = null,
  layout: () => IDashboardLayout = () => ({})
): void {
  const { app, model, target, applies, pick, reachable } = context;
  const { commands, shell } = app;
  const histories = new WidgetTracker<MainAreaWidget<EventHistory>>({
    namespace: HISTORY_NAMESPACE
  });

  commands.addCommand(CommandIDs.insertClientCell, {
    label: args => {
      const cluster = target(args);
      return cluster
        ? trans.__('Insert Client Cell for %1', cluster.name)
        : trans.__('Insert Client Cell for Cluster…');
    },
    caption: trans.__(
      'Insert code that connects a Dask client to a cluster: a cell below the active one in a notebook, the prompt of a console, or the cursor in a file'
    ),
    isEnabled: args => {
      if (!findDestination(shell.currentWidget, targets)) {
        return false;
      }
      return applies(args, connectable);
    },
    execute: async args => {
      const destination = findDestination(shell.currentWidget, targets);
      if (!destination) {
        return;
      }
      const cluster = await pick(
        args,
        connectable,
        trans.__('Insert Client cell for cluster')
      );
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
    label: trans.__('Event History'),
    caption: trans.__(
      'Every lifecycle change and scaling decision, with its reason'
    ),
    isEnabled: args => applies(args),
    execute: async args => {
      // A restored tab names its cluster by id and name: the cluster may be
      // gone, or not loaded yet.
      const cluster =
        typeof args['clusterId'] === 'string' ? target(args) : await pick(args);
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
    label: trans.__('Logs'),
    caption: trans.__(
      "The scheduler's and each worker's log, in a tab: follow, search, download"
    ),
    isEnabled: args => applies(args),
    execute: async args => {
      const cluster = await pick(args);
      if (cluster) {
        openLogs(app, model, cluster, args.name as string | undefined);
      }
    }
  });

  commands.addCommand(CommandIDs.openDashboard, {
    label: trans.__('Open Dashboard'),
    caption: trans.__('Open the Dask dashboard in a JupyterLab tab'),
    isEnabled: args => applies(args, withDashboard),
    execute: async args => {
      const cluster = await pick(args, withDashboard);
      if (cluster?.dashboard_url && opensElsewhere(cluster.dashboard_url)) {
        window.open(cluster.dashboard_url, '_blank', 'noopener'); // a gateway's dashboard route
      } else if (cluster?.dashboard_url) {
        await openDashboard(app, cluster, layout());
      }
    }
  });

  commands.addCommand(CommandIDs.openPlotByName, {
    label: args => {
      const slug = typeof args['plot'] === 'string' ? args['plot'] : '';
      const name = slug ? (catalogLabel(slug) ?? slug) : '';
      return name
        ? trans.__('Open Dashboard Plot: %1', name)
        : trans.__('Open Dashboard Plot…');
    },
    caption: trans.__(
      'Open one plot of a cluster’s Dask dashboard in a tab of its own, by name (asks which cluster when there are several)'
    ),
    isEnabled: args => applies(args, withDashboard),
    execute: async args => {
      const cluster = await pick(
        args,
        withDashboard,
        trans.__('Open a dashboard plot of which cluster?')
      );
      if (!cluster) {
        return;
      }
      const slug = typeof args['plot'] === 'string' ? args['plot'] : '';
      await openPlotByName(commands, cluster, slug);
    }
  });

  commands.addCommand(CommandIDs.copyAddress, {
    label: trans.__('Copy Scheduler Address'),
    caption: trans.__('Copy the scheduler address'),
    isEnabled: reachable,
    execute: async args => {
      const address = (await pick(args, hasScheduler))?.scheduler_address;
      if (address) {
        Clipboard.copyToSystem(address);
        Notification.info(trans.__('Copied %1', address), { autoClose: 3000 });
      }
    }
  });
}

/**
 * Open the plot of slug `slug` of a cluster's dashboard, or (without a
 * slug) the one the user picks from the cluster's plots, offered in the
 * order and under the names of the card's Plots list.
 */
async function openPlotByName(
  commands: CommandRegistry,
  cluster: ICluster,
  slug: string
): Promise<void> {
  let plots: IPlot[];
  try {
    plots = (await commands.execute(CommandIDs.listPlots, {
      clusterId: cluster.id
    })) as IPlot[];
  } catch (reason) {
    Notification.error(
      trans.__('Could not list the plots: %1', errorMessage(reason))
    );
    return;
  }
  const offered = arrangePlots(plots, {
    gpus: clusterHasGpus(cluster)
  }).groups.flatMap(group => group.plots);
  let plot = slug ? offered.find(p => plotSlug(p.path) === slug) : undefined;
  if (slug && !plot) {
    Notification.warning(
      trans.__(
        'The dashboard of %1 has no plot %2',
        cluster.name,
        catalogLabel(slug) ?? slug
      ),
      { autoClose: 5000 }
    );
    return;
  }
  if (!plot) {
    const items = offered.map(p => p.label);
    const result = await InputDialog.getItem({
      title: trans.__('Open a dashboard plot of %1', cluster.name),
      label: trans.__('Plot'),
      items
    });
    if (!result.button.accept || result.value === null) {
      return;
    }
    plot = offered[items.indexOf(result.value)];
  }
  if (plot) {
    await commands.execute(CommandIDs.openPlot, {
      clusterId: cluster.id,
      clusterName: cluster.name,
      path: plot.path,
      label: plot.label
    });
  }
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
  widget.title.label = trans.__('History %1', clusterName);
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
  widget.title.label = trans.__('Logs %1', cluster.name);
  widget.title.icon = clusterIcon;
  widget.title.closable = true;
  app.shell.add(widget, 'main');
}

/**
 * Open (or show again) a cluster's Dask dashboard in a main-area tab, then
 * the plots of `layout` (the `defaultLayout` setting), each where it says.
 * It is served by this server's authenticated proxy.
 */
async function openDashboard(
  app: JupyterFrontEnd,
  cluster: ICluster,
  layout: IDashboardLayout
): Promise<void> {
  await app.commands.execute(CommandIDs.openPlot, {
    clusterId: cluster.id,
    path: STATUS_PATH,
    label: trans.__('Dashboard')
  });
  await openLayout(app.commands, cluster, layout);
}

/**
 * Open the plots of `layout` for a cluster whose Dashboard tab is open,
 * each in a tab placed as the layout says; names of plots the dashboard
 * does not have are skipped (with a console warning).
 */
async function openLayout(
  commands: CommandRegistry,
  cluster: ICluster,
  layout: IDashboardLayout
): Promise<void> {
  const order = layoutOrder(layout);
  if (!order.length) {
    return;
  }
  const plots = (await commands.execute(CommandIDs.listPlots, {
    clusterId: cluster.id
  })) as IPlot[];
  const paths = new Map<string, IPlot>();
  for (const plot of plots) {
    paths.set(plotSlug(plot.path), plot);
  }
  for (const { slug, entry, ref } of order) {
    const plot = paths.get(slug);
    if (!plot) {
      console.warn(
        trans.__('defaultLayout: the dashboard has no plot %1', slug)
      );
      continue;
    }
    const refPlot = ref ? paths.get(ref) : undefined;
    await commands.execute(CommandIDs.openPlot, {
      clusterId: cluster.id,
      clusterName: cluster.name,
      path: plot.path,
      label: plot.label,
      mode: entry.mode ?? 'tab-after',
      ref: dashboardTabId(cluster.id, refPlot ? refPlot.path : STATUS_PATH)
    });
  }
}
