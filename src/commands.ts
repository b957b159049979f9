/**
 * The extension's commands: starting a cluster and showing the sidebar
 * here, the commands that use or change a cluster in their own modules, and
 * the card's context menu that holds them.
 */
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';

import { addClusterCommands } from './clustercommands';
import { commandContext } from './commandcontext';
import { showNewClusterDialog } from './components/NewClusterDialog';
import { trans } from './i18n';
import { clusterIcon } from './icons';
import { IInsertTargets } from './insert';
import { IDashboardLayout } from './layout';
import { ClustersModel } from './model';
import { tryRequest } from './notify';
import { CommandIDs } from './tokens';
import { addUseCommands } from './usecommands';

/**
 * User preferences the commands follow (from the settings registry).
 */
export interface IPreferences {
  defaultTemplate: string;
  /** Plots that open with a cluster's dashboard, and where. */
  defaultLayout: IDashboardLayout;
  /** The sidebar is hidden (the hideClusterManager setting). */
  hideClusterManager: boolean;
}

/**
 * The commands the palette offers (category "Dask Clusters"); those about
 * one cluster act on the selected card, or ask which cluster. The card's
 * context menu, the main menu's Clusters entry and the shortcuts are
 * declared in schema/plugin.json, where users can change them.
 */
export const PALETTE_COMMANDS = [
  CommandIDs.newCluster,
  CommandIDs.attachCluster,
  CommandIDs.showSidebar,
  CommandIDs.insertClientCell,
  CommandIDs.openDashboard,
  CommandIDs.openPlotByName,
  CommandIDs.copyAddress,
  CommandIDs.scale,
  CommandIDs.adapt,
  CommandIDs.editSpec,
  CommandIDs.rename,
  CommandIDs.idleTimeout,
  CommandIDs.showEvents,
  CommandIDs.showLogs,
  CommandIDs.restart,
  CommandIDs.shutdown
];

/**
 * Add the extension's commands.
 */
export function addCommands(options: {
  app: JupyterFrontEnd;
  model: ClustersModel;
  sidebarId: string;
  targets: IInsertTargets;
  preferences: IPreferences;
  /** Puts History tabs back after a reload. */
  restorer?: ILayoutRestorer | null;
  /** The id of the cluster selected in the sidebar. */
  selected?: () => string | null;
}): void {
  const { app, model, preferences } = options;
  addStartCommands(options);
  const context = commandContext(app, model, options.selected);
  addUseCommands(
    context,
    options.targets,
    options.restorer ?? null,
    () => preferences.defaultLayout
  );
  addClusterCommands(context);
}

/**
 * New Cluster, and Show Clusters Sidebar.
 */
function addStartCommands(options: {
  app: JupyterFrontEnd;
  model: ClustersModel;
  sidebarId: string;
  preferences: IPreferences;
}): void {
  const { app, model, preferences } = options;
  const { commands, shell } = app;

  commands.addCommand(CommandIDs.newCluster, {
    label: trans.__('New Cluster…'),
    caption: trans.__('Start a new cluster from one of the server’s templates'),
    icon: args => (args['isPalette'] ? undefined : clusterIcon),
    execute: async () => {
      const templates = await tryRequest(
        trans.__('Could not load the templates'),
        () => model.listTemplates()
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
    label: trans.__('Show Clusters Sidebar'),
    caption: trans.__(
      'Show the Dask clusters sidebar and move the focus into it'
    ),
    // The hideClusterManager setting takes the sidebar away.
    isEnabled: () => !preferences.hideClusterManager,
    // The sidebar moves the focus into itself when activated; the command
    // palette hands the focus back when it closes, so activate once more then.
    execute: () => {
      shell.activateById(options.sidebarId);
      setTimeout(() => shell.activateById(options.sidebarId), 100);
    }
  });
}
