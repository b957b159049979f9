import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { IConsoleTracker } from '@jupyterlab/console';
import { IEditorTracker } from '@jupyterlab/fileeditor';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator } from '@jupyterlab/translation';
import { Signal } from '@lumino/signaling';

import { AutoConnector } from './autoconnect';
import { addCommands, IPreferences, PALETTE_COMMANDS } from './commands';
import { acceptClusterDrops } from './drop';
import { addDashboardCommands } from './dashboardcommands';
import { setTranslator, trans } from './i18n';
import { IDashboardLayout } from './layout';
import { MOST_USED_ORDER } from './plotcatalog';
import { ClustersModel } from './model';
import { BadNewsNotifier } from './notifications';
import { errorMessage } from './notify';
import { ClusterManagerError } from './request';
import { ClusterSidebar } from './sidebar';
import { ClusterStatusItem, STATUS_ITEM_ID } from './statusitem';
import { CommandIDs, IClustersModel, PLUGIN_ID } from './tokens';

export { capabilitiesOf } from './capabilities';
export { ClustersModel } from './model';
export { ClusterManagerError, requestAPI } from './request';
export { CommandIDs, IClustersModel } from './tokens';
export * from './types';

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
    IEditorTracker,
    ITranslator,
    IStatusBar
  ],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    notebooks: INotebookTracker | null,
    settingRegistry: ISettingRegistry | null,
    consoles: IConsoleTracker | null,
    editors: IEditorTracker | null,
    translator: ITranslator | null,
    statusBar: IStatusBar | null
  ): IClustersModel => {
    setTranslator(translator);
    const targets = { notebooks, consoles, editors };
    const model = new ClustersModel({
      serverSettings: app.serviceManager.serverSettings
    });
    const preferences: IPreferences = {
      defaultTemplate: '',
      defaultLayout: {},
      hideClusterManager: false
    };
    let defaultURL = '';
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
      restorer,
      selected: () => sidebar.selectedClusterId
    });
    acceptClusterDrops({
      model,
      targets,
      activate: id => app.shell.activateById(id)
    });
    addDashboardCommands({
      app,
      model,
      restorer,
      defaultAddress: () => defaultURL
    });
    new BadNewsNotifier(model, app.commands); // lives as long as the page
    model.start();

    if (palette) {
      // "dask" typed in the palette finds the commands.
      const category = trans.__('Dask Clusters');
      for (const command of PALETTE_COMMANDS) {
        if (app.commands.hasCommand(command)) {
          palette.addItem({ command, category });
        }
      }
      // The most used dashboard plots by name (any plot: "Open Dashboard Plot…").
      for (const plot of MOST_USED_ORDER) {
        palette.addItem({
          command: CommandIDs.openPlotByName,
          args: { plot },
          category
        });
      }
    }

    // Emitted when hideClusterManager changes: the status bar asks isActive.
    const sidebarShown = new Signal<IPreferences, void>(preferences);
    if (statusBar) {
      statusBar.registerStatusItem(STATUS_ITEM_ID, {
        item: new ClusterStatusItem({
          model,
          onClick: () => void app.commands.execute(CommandIDs.showSidebar)
        }),
        align: 'left',
        rank: 100,
        isActive: () => !preferences.hideClusterManager,
        activeStateChanged: sidebarShown
      });
    }

    if (settingRegistry) {
      const apply = (settings: ISettingRegistry.ISettings) => {
        preferences.defaultTemplate = settings.get('defaultTemplate')
          .composite as string;
        preferences.defaultLayout = (settings.get('defaultLayout').composite ??
          {}) as IDashboardLayout;
        preferences.hideClusterManager =
          !!settings.get('hideClusterManager').composite;
        sidebar.setCompactCards(!!settings.get('compactCards').composite);
        showSidebar(app, sidebar, !preferences.hideClusterManager);
        const url = (
          (settings.get('defaultURL').composite as string) ?? ''
        ).trim();
        if (url !== defaultURL) {
          defaultURL = url;
          attachDefault(model, url);
        }
        if (autoConnector) {
          autoConnector.clusterName = settings.get('autoConnectCluster')
            .composite as string;
        }
        app.commands.notifyCommandChanged(CommandIDs.showSidebar);
        sidebarShown.emit();
      };
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          apply(settings);
          settings.changed.connect(apply);
          // The header's toggle is remembered as the setting.
          sidebar.onCompactCardsChanged = on =>
            void settings
              .set('compactCards', on)
              .catch(reason =>
                console.error('clustermgr-lab: cannot save settings', reason)
              );
        })
        .catch(reason =>
          console.error('clustermgr-lab: cannot load settings', reason)
        );
    }
    return model;
  }
};

/**
 * Put the sidebar in the left area, or take it out (hideClusterManager).
 */
function showSidebar(
  app: JupyterFrontEnd,
  sidebar: ClusterSidebar,
  show: boolean
): void {
  if (show && !sidebar.parent) {
    app.shell.add(sidebar, 'left', { rank: 200 });
  } else if (!show && sidebar.parent) {
    sidebar.parent = null;
  }
}

/**
 * Attach the cluster at `address` (the defaultURL setting) once the list is
 * loaded, unless a listed cluster has that address already.
 */
function attachDefault(model: ClustersModel, address: string): void {
  if (!address) {
    return;
  }
  const attach = () => {
    if (model.clusters.some(c => c.scheduler_address === address)) {
      return;
    }
    model.createCluster({ attach: address }).catch(reason => {
      if ((reason as ClusterManagerError).status === 409) {
        return; // listed meanwhile (another tab attached it)
      }
      Notification.warning(
        trans.__(
          'The default cluster %1 (defaultURL setting) could not be attached: %2',
          address,
          errorMessage(reason)
        ),
        { autoClose: false }
      );
    });
  };
  if (model.loaded) {
    attach();
    return;
  }
  const onChange = () => {
    if (model.loaded) {
      model.changed.disconnect(onChange);
      attach();
    }
  };
  model.changed.connect(onChange);
}

export default plugin;
