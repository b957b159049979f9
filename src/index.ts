import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IConsoleTracker } from '@jupyterlab/console';
import { IEditorTracker } from '@jupyterlab/fileeditor';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { AutoConnector } from './autoconnect';
import { addCommands, IPreferences } from './commands';
import { acceptClusterDrops } from './drop';
import { addDashboardCommands } from './dashboardcommands';
import { ClustersModel } from './model';
import { BadNewsNotifier } from './notifications';
import { ClusterSidebar } from './sidebar';
import { CommandIDs, IClustersModel, PLUGIN_ID } from './tokens';

export { capabilitiesOf } from './capabilities';
export { ClustersModel } from './model';
export { ClusterManagerError, requestAPI } from './request';
export { CommandIDs, IClustersModel } from './tokens';
export * from './types';

// "dask" typed in the palette finds the commands.
const PALETTE_CATEGORY = 'Dask Clusters';

const plugin: JupyterFrontEndPlugin<IClustersModel> = {
  id: PLUGIN_ID,
  description: 'A sidebar to manage Dask clusters run by the Jupyter server.',
  autoStart: true,
  provides: IClustersModel,
  optional: [
    ILayoutRestorer,
    ICommandPalette,
    INotebookTracker,
    ISettingRegistry,
    IConsoleTracker,
    IEditorTracker
  ],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    notebooks: INotebookTracker | null,
    settingRegistry: ISettingRegistry | null,
    consoles: IConsoleTracker | null,
    editors: IEditorTracker | null
  ): IClustersModel => {
    const targets = { notebooks, consoles, editors };
    const model = new ClustersModel({
      serverSettings: app.serviceManager.serverSettings
    });
    const preferences: IPreferences = { defaultTemplate: '' };
    const autoConnector = notebooks
      ? new AutoConnector({ model, notebooks })
      : null;

    const sidebar = new ClusterSidebar({
      model,
      commands: app.commands,
      canInsert: !!(notebooks || consoles || editors)
    });
    app.shell.add(sidebar, 'left', { rank: 200 });
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
    }

    addCommands({
      app,
      model,
      sidebarId: sidebar.id,
      targets,
      preferences,
      restorer
    });
    acceptClusterDrops({
      model,
      targets,
      activate: id => app.shell.activateById(id)
    });
    addDashboardCommands({ app, model, restorer });
    new BadNewsNotifier(model, app.commands); // lives as long as the page
    model.start();

    if (palette) {
      for (const command of [
        CommandIDs.newCluster,
        CommandIDs.attachCluster,
        CommandIDs.showSidebar,
        CommandIDs.insertClientCell
      ]) {
        if (app.commands.hasCommand(command)) {
          palette.addItem({ command, category: PALETTE_CATEGORY });
        }
      }
    }

    if (settingRegistry) {
      const apply = (settings: ISettingRegistry.ISettings) => {
        preferences.defaultTemplate = settings.get('defaultTemplate')
          .composite as string;
        if (autoConnector) {
          autoConnector.clusterName = settings.get('autoConnectCluster')
            .composite as string;
        }
      };
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          apply(settings);
          settings.changed.connect(apply);
        })
        .catch(reason =>
          console.error('clustermgr-lab: cannot load settings', reason)
        );
    }
    return model;
  }
};

export default plugin;
