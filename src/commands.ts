/**
 * The extension's commands: starting a cluster and showing the sidebar
 * here, the commands that use or change a cluster in their own modules, and
 * the card's context menu that holds them.
 */
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';

import { addClusterCommands } from './clustercommands';
import { commandContext, FROM_CONTEXT_MENU } from './commandcontext';
import { showNewClusterDialog } from './components/NewClusterDialog';
import { clusterIcon } from './icons';
import { IInsertTargets } from './insert';
import { ClustersModel } from './model';
import { tryRequest } from './notify';
import { CommandIDs } from './tokens';
import { addUseCommands } from './usecommands';

/**
 * User preferences the commands follow (from the settings registry).
 */
export interface IPreferences {
  defaultTemplate: string;
}

/**
 * The actions of a card's context menu, in order.
 */
const CARD_MENU = [
  CommandIDs.insertClientCell,
  CommandIDs.openDashboard,
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
 * Add the extension's commands, and the card context menu.
 */
export function addCommands(options: {
  app: JupyterFrontEnd;
  model: ClustersModel;
  sidebarId: string;
  targets: IInsertTargets;
  preferences: IPreferences;
  /** Puts History tabs back after a reload. */
  restorer?: ILayoutRestorer | null;
}): void {
  const { app, model } = options;
  addStartCommands(options);
  const context = commandContext(app, model);
  addUseCommands(context, options.targets, options.restorer ?? null);
  addClusterCommands(context);

  CARD_MENU.forEach((command, rank) => {
    if (app.commands.hasCommand(command)) {
      app.contextMenu.addItem({
        command,
        selector: '.cm-ClusterCard',
        rank,
        args: { [FROM_CONTEXT_MENU]: true }
      });
    }
  });
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
}
