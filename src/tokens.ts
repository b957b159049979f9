/**
 * The extension's public handles: the `IClustersModel` token other
 * extensions require to use the clusters, the command ids, the plugin id.
 */
import { ServerConnection } from '@jupyterlab/services';
import { Token } from '@lumino/coreutils';
import { IDisposable } from '@lumino/disposable';
import { ISignal } from '@lumino/signaling';

import type { ClusterManagerError } from './request';
import {
  IAttachClusterRequest,
  ICluster,
  IClusterChange,
  ICreateClusterRequest,
  IEvent,
  ILimits,
  ITemplate,
  PatchClusterRequest
} from './types';

/**
 * The Dask clusters the Jupyter server manages, kept up to date from its
 * push stream, and the requests that create, change and shut them down.
 *
 * Another extension gets it with `requires: [IClustersModel]`.
 */
export interface IClustersModel extends IDisposable {
  /**
   * Emitted whenever the list of clusters or a cluster changes.
   */
  readonly changed: ISignal<IClustersModel, IClustersModel.IChange>;
  /**
   * Emitted when the live stream connects (`true`) or drops (`false`).
   */
  readonly connectionChanged: ISignal<IClustersModel, boolean>;
  /**
   * Whether the live stream is connected (a snapshot has been received).
   */
  readonly connected: boolean;
  /**
   * Whether the server extension answers: `unknown` until the first check,
   * `missing` when its API is not there (404), else `ok`.
   */
  readonly serverState: IClustersModel.ServerState;
  /**
   * Whether the list has been loaded at least once.
   */
  readonly loaded: boolean;
  /**
   * The last error met while following the server, if any.
   */
  readonly lastError: ClusterManagerError | null;
  /**
   * Why the server cannot record clusters now (its store cannot be written),
   * or null while it can: new clusters and changes are refused meanwhile.
   */
  readonly storeError: string | null;
  /**
   * The clusters, in server order (oldest first).
   */
  readonly clusters: ReadonlyArray<ICluster>;
  /**
   * The server's limits, as its templates answer last gave them.
   */
  readonly limits: ILimits | null;
  /**
   * The server settings used for requests.
   */
  readonly serverSettings: ServerConnection.ISettings;
  /**
   * Find a cluster by id.
   */
  get(id: string): ICluster | undefined;
  /**
   * Worker counts of a cluster over the last minutes, oldest first.
   */
  history(id: string): ReadonlyArray<IClustersModel.IHistoryPoint>;
  /**
   * Load the list with a GET (the stream is the usual source).
   */
  refresh(): Promise<void>;
  /**
   * The templates the server offers (each with its capabilities).
   */
  listTemplates(): Promise<ITemplate[]>;
  /**
   * Ask for a new cluster (or attach one started elsewhere); resolves with
   * the pending cluster.
   */
  createCluster(
    request?: ICreateClusterRequest | IAttachClusterRequest
  ): Promise<ICluster>;
  /**
   * Change a cluster (scale, spec, adapt or name).
   */
  patchCluster(
    id: string,
    request: PatchClusterRequest
  ): Promise<IClusterChange>;
  /**
   * Shut a cluster down (detach it, when it cannot be stopped).
   */
  shutdownCluster(id: string): Promise<ICluster | undefined>;
}

/**
 * The token of the clusters model.
 */
export const IClustersModel = new Token<IClustersModel>(
  'clustermgr-lab:IClustersModel',
  'The Dask clusters the Jupyter server manages, kept up to date, with requests to create, change and shut them down.'
);

export namespace IClustersModel {
  export type ServerState = 'unknown' | 'ok' | 'missing';

  /**
   * Worker counts at a moment (ms since the epoch).
   */
  export interface IHistoryPoint {
    time: number;
    running: number;
    requested: number;
  }

  /**
   * What changed.
   */
  export interface IChange {
    type:
      | 'snapshot'
      | 'refresh'
      | 'added'
      | 'changed'
      | 'removed'
      | 'connection'
      | 'server'
      | 'status'
      | 'error';
    /** The cluster concerned, for added/changed/removed. */
    id?: string;
    /** The cluster's events since its previous change (added/changed, from the stream). */
    events?: ReadonlyArray<IEvent>;
  }
}

/**
 * Command ids.
 */
export namespace CommandIDs {
  export const newCluster = 'clustermgr:new-cluster';
  export const showSidebar = 'clustermgr:show-sidebar';
  export const insertClientCell = 'clustermgr:insert-client-cell';
  export const openDashboard = 'clustermgr:open-dashboard';
  export const copyAddress = 'clustermgr:copy-address';
  export const scale = 'clustermgr:scale';
  export const adapt = 'clustermgr:adapt';
  export const editSpec = 'clustermgr:edit-spec';
  export const rename = 'clustermgr:rename';
  export const idleTimeout = 'clustermgr:idle-timeout';
  export const shutdown = 'clustermgr:shutdown';
  export const restart = 'clustermgr:restart';
  export const showEvents = 'clustermgr:show-events';
  export const showLogs = 'clustermgr:show-logs';
  export const openPlot = 'clustermgr:open-plot';
  export const openPlotByName = 'clustermgr:open-plot-by-name';
  export const listPlots = 'clustermgr:list-plots';
  export const attachCluster = 'clustermgr:attach-cluster';
}

/**
 * The id of the extension's plugin (and of its settings).
 */
export const PLUGIN_ID = 'clustermgr-lab:plugin';
