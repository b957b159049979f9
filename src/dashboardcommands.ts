/**
 * Commands for what this server does not start itself or shows in tabs:
 * dashboard pages and plots as restorable JupyterLab tabs, and attaching a
 * cluster started elsewhere.
 */
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';
import { DockLayout } from '@lumino/widgets';

import {
  DashboardView,
  dashboardTabId,
  fetchPlots,
  STATUS_PATH
} from './dashboard';
import { showAttachDialog } from './dialogs';
import { trans } from './i18n';
import { clusterIcon } from './icons';
import { ClustersModel } from './model';
import { tryRequest } from './notify';
import { CommandIDs } from './tokens';

/**
 * The namespace of dashboard tabs in the layout restorer.
 */
export const DASHBOARD_NAMESPACE = 'clustermgr-dashboard';

export function addDashboardCommands(options: {
  app: JupyterFrontEnd;
  model: ClustersModel;
  restorer: ILayoutRestorer | null;
  /** The address the Attach dialog starts with (the defaultURL setting). */
  defaultAddress?: () => string;
}): void {
  const { app, model, restorer } = options;
  const defaultAddress = options.defaultAddress ?? (() => '');
  const { commands, shell } = app;
  const tracker = new WidgetTracker<MainAreaWidget<DashboardView>>({
    namespace: DASHBOARD_NAMESPACE
  });

  commands.addCommand(CommandIDs.openPlot, {
    label: args =>
      typeof args['label'] === 'string'
        ? trans.__('Open %1', args['label'])
        : trans.__('Open Dashboard Plot'),
    caption: trans.__(
      'Open a page of a cluster’s Dask dashboard in a JupyterLab tab'
    ),
    execute: args => {
      const clusterId = args['clusterId'];
      if (typeof clusterId !== 'string' || !clusterId) {
        return;
      }
      const path =
        typeof args['path'] === 'string' ? args['path'] : STATUS_PATH;
      const label =
        typeof args['label'] === 'string'
          ? args['label']
          : trans.__('Dashboard');
      const clusterName =
        typeof args['clusterName'] === 'string'
          ? args['clusterName']
          : undefined;
      const id = dashboardTabId(clusterId, path);
      const open = tracker.find(widget => widget.id === id);
      if (open) {
        shell.activateById(id);
        return open;
      }
      const content = new DashboardView({
        model,
        clusterId,
        path,
        label,
        clusterName
      });
      const widget = new MainAreaWidget({ content });
      widget.id = id; // the label follows the cluster's name (DashboardView)
      widget.title.icon = clusterIcon;
      widget.title.closable = true;
      widget.addClass(path === STATUS_PATH ? 'cm-Dashboard' : 'cm-Plot');
      void tracker.add(widget);
      // Where the tab goes (the defaultLayout setting): relative to the tab
      // `ref`, when that is open.
      const mode = typeof args['mode'] === 'string' ? args['mode'] : undefined;
      const ref =
        typeof args['ref'] === 'string' &&
        tracker.find(widget => widget.id === args['ref'])
          ? args['ref']
          : undefined;
      shell.add(widget, 'main', {
        mode: mode as DockLayout.InsertMode | undefined,
        ref,
        activate: !mode
      });
      return widget;
    }
  });

  commands.addCommand(CommandIDs.listPlots, {
    label: trans.__('List Dashboard Plots'),
    caption: trans.__('The individual plots of a cluster’s Dask dashboard'),
    execute: args => fetchPlots(model.serverSettings, String(args['clusterId']))
  });

  commands.addCommand(CommandIDs.attachCluster, {
    label: trans.__('Attach Cluster…'),
    caption: trans.__(
      'List a running cluster started elsewhere, by its scheduler address; it is observed, never scaled or stopped'
    ),
    execute: async args => {
      const address =
        typeof args['address'] === 'string' ? args['address'] : '';
      if (address) {
        // Given by a caller (not typed by a person): no dialog.
        return tryRequest(trans.__('Could not attach a cluster'), () =>
          model.createCluster({ attach: address })
        );
      }
      return showAttachDialog(model, defaultAddress());
    }
  });

  if (restorer) {
    void restorer.restore(tracker, {
      command: CommandIDs.openPlot,
      args: widget => ({
        clusterId: widget.content.clusterId,
        path: widget.content.path,
        label: widget.content.label,
        clusterName: widget.content.clusterName
      }),
      name: widget => `${widget.content.clusterId}${widget.content.path}`
    });
  }
}
