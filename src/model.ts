import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import {
  API_PATH,
  asServerError,
  ClusterManagerError,
  jsonBody,
  requestAPI
} from './request';
import { inUseHere } from './limits';
import { IClustersModel } from './tokens';
import {
  ICluster,
  IClusterChange,
  IClusterList,
  IAttachClusterRequest,
  ICreateClusterRequest,
  IEvent,
  ILimits,
  IServerStatus,
  ITemplate,
  ITemplateList,
  PatchClusterRequest,
  StreamMessage
} from './types';
import { trans } from './i18n';

/**
 * The clusters known to the Jupyter server, kept up to date.
 *
 * The model follows the `clustermgr/api/stream` WebSocket: a snapshot, then
 * one message per change. A `Poll` runs the stream: each of its ticks is one
 * connection, from opening to loss. When the socket drops after a snapshot
 * it reconnects after the shortest delay (and gets a fresh snapshot); when it
 * cannot connect, the poll backs off exponentially. While the stream cannot
 * be reached, each reconnection attempt falls back to one `GET` of the list,
 * so the list is never stale for longer than the backoff delay. Nothing is
 * polled while the stream is up.
 */
export class ClustersModel implements IClustersModel {
  constructor(options: ClustersModel.IOptions = {}) {
    this._settings = options.serverSettings ?? ServerConnection.makeSettings();
    this._stream = new Poll<void, void>({
      auto: false,
      factory: () => this._followStream(),
      frequency: {
        interval: options.reconnectMinDelay ?? 500,
        max: options.reconnectMaxDelay ?? 30000,
        backoff: 2
      },
      name: 'clustermgr:stream',
      // Keep following while the page is hidden: the sidebar is live.
      standby: 'never'
    });
  }

  /**
   * The server settings used for requests.
   */
  get serverSettings(): ServerConnection.ISettings {
    return this._settings;
  }

  /**
   * Emitted whenever the list of clusters or a cluster changes.
   */
  get changed(): ISignal<this, ClustersModel.IChange> {
    return this._changed;
  }

  /**
   * Emitted when the stream connects or disconnects.
   */
  get connectionChanged(): ISignal<this, boolean> {
    return this._connectionChanged;
  }

  /**
   * Whether the live stream is connected (a snapshot has been received).
   */
  get connected(): boolean {
    return this._connected;
  }

  /**
   * Whether the server extension answers: `unknown` until the first check,
   * `missing` when its API is not there (404), else `ok`.
   */
  get serverState(): ClustersModel.ServerState {
    return this._serverState;
  }

  /**
   * Worker counts of a cluster over the last minutes, oldest first, as seen
   * on the stream.
   */
  history(id: string): ReadonlyArray<ClustersModel.IHistoryPoint> {
    return this._history.get(id) ?? [];
  }

  /**
   * Whether the list has been loaded at least once (by stream or GET).
   */
  get loaded(): boolean {
    return this._loaded;
  }

  /**
   * The last error met while following the server, if any.
   */
  get lastError(): ClusterManagerError | null {
    return this._lastError;
  }

  /**
   * Why the server cannot record clusters now, or null while it can.
   */
  get storeError(): string | null {
    return this._storeError;
  }

  /**
   * The clusters, in server order (oldest first).
   */
  get clusters(): ReadonlyArray<ICluster> {
    return Array.from(this._clusters.values());
  }

  /**
   * Find a cluster by id.
   */
  get(id: string): ICluster | undefined {
    return this._clusters.get(id);
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * Start following the server. Safe to call more than once.
   */
  start(): void {
    if (this._started || this._isDisposed) {
      return;
    }
    this._started = true;
    void this._checkServer();
  }

  /**
   * Load the list with a GET (the stream is the usual source).
   */
  async refresh(): Promise<void> {
    const data = await requestAPI<IClusterList>('clusters', {}, this._settings);
    if (this._isDisposed) {
      return;
    }
    this._lastError = null;
    this._replaceAll(data?.clusters ?? [], 'refresh');
  }

  /**
   * The templates the server offers.
   */
  async listTemplates(): Promise<ITemplate[]> {
    const data = await requestAPI<ITemplateList>(
      'templates',
      {},
      this._settings
    );
    this._limits = data?.limits ?? this._limits;
    return data?.templates ?? [];
  }

  /**
   * The server's limits, as its templates answer last gave them.
   */
  get limits(): ILimits | null {
    return this._limits;
  }

  /**
   * The server's limits with what the live clusters other than `except`
   * use on this machine (for the machine's warnings).
   */
  limitsFor(except?: string): ILimits | null {
    if (!this._limits) {
      return null;
    }
    return {
      ...this._limits,
      in_use_here: inUseHere(this.clusters, except)
    };
  }

  /**
   * Ask the server for a new cluster (or to attach one started elsewhere).
   * Resolves with the pending cluster.
   */
  async createCluster(
    request: ICreateClusterRequest | IAttachClusterRequest = {}
  ): Promise<ICluster> {
    const cluster = await requestAPI<ICluster>(
      'clusters',
      jsonBody('POST', request),
      this._settings
    );
    // The stream usually reports it first; only fill the gap if it did not.
    if (cluster?.id && !this._clusters.has(cluster.id)) {
      if (!this._removed.has(cluster.id)) {
        this._upsert(cluster, 'added');
      }
    }
    if (!this._connected) {
      void this._refreshQuietly();
    }
    return cluster;
  }

  /**
   * Change a cluster (scale, spec, adapt or name).
   */
  async patchCluster(
    id: string,
    request: PatchClusterRequest
  ): Promise<IClusterChange> {
    const cluster = await requestAPI<IClusterChange>(
      `clusters/${encodeURIComponent(id)}`,
      jsonBody('PATCH', request),
      this._settings
    );
    if (!this._connected && cluster?.id && this._clusters.has(cluster.id)) {
      this._upsert(cluster, 'changed');
    }
    return cluster;
  }

  /**
   * Ask the server to start a failed or stopped cluster again (same id, name
   * and spec). Resolves with the cluster, pending.
   */
  async restartCluster(id: string): Promise<ICluster> {
    const cluster = await requestAPI<ICluster>(
      `clusters/${encodeURIComponent(id)}/restart`,
      { method: 'POST' },
      this._settings
    );
    if (!this._connected && cluster?.id) {
      this._upsert(cluster, 'changed');
    }
    return cluster;
  }

  /**
   * Ask the server to shut a cluster down. It leaves the list when stopped.
   */
  async shutdownCluster(id: string): Promise<ICluster | undefined> {
    const cluster = await requestAPI<ICluster | undefined>(
      `clusters/${encodeURIComponent(id)}`,
      { method: 'DELETE' },
      this._settings
    );
    if (!this._connected) {
      if (cluster?.id && this._clusters.has(cluster.id)) {
        this._upsert(cluster, 'changed');
      }
      void this._refreshQuietly();
    }
    return cluster;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._stream.dispose();
    this._closeSocket();
    Signal.clearData(this);
  }

  /**
   * The URL of the stream, with the token if the settings have one.
   */
  protected streamUrl(): string {
    let url = URLExt.join(this._settings.wsUrl, API_PATH, 'stream');
    const token = this._settings.token;
    if (token) {
      url += `?token=${encodeURIComponent(token)}`;
    }
    return url;
  }

  /**
   * Check that the server extension is there (its templates answer), then
   * follow the stream. A 404 means it is not installed or not enabled:
   * say so and do not try the stream.
   */
  private async _checkServer(): Promise<void> {
    try {
      await this.listTemplates();
      this._serverState = 'ok';
    } catch (error) {
      if (error instanceof ClusterManagerError && error.status === 404) {
        this._serverState = 'missing';
        this._changed.emit({ type: 'server' });
        return;
      }
      // Anything else (e.g. the server restarting): the stream's backoff
      // deals with it.
      this._serverState = 'ok';
    }
    if (this._isDisposed) {
      return;
    }
    this._changed.emit({ type: 'server' });
    void this._stream.start();
  }

  /**
   * One tick of the stream's poll: connect, follow the stream until it is
   * lost, then fetch the list once so the view is current. Resolves when
   * the connection had got a snapshot (reconnect soon), rejects when it never
   * did (the poll backs off).
   */
  private _followStream(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let gotSnapshot = false;
      const lost = () => {
        if (this._isDisposed) {
          return;
        }
        this._setConnected(false);
        this._seq = null;
        void this._refreshQuietly();
        if (gotSnapshot) {
          resolve();
        } else {
          reject();
        }
      };
      let socket: WebSocket;
      try {
        socket = new this._settings.WebSocket(this.streamUrl());
      } catch {
        lost();
        return;
      }
      this._socket = socket;

      socket.onmessage = (event: MessageEvent) => {
        if (this._socket !== socket) {
          return;
        }
        let message: StreamMessage;
        try {
          message = JSON.parse(event.data as string) as StreamMessage;
        } catch {
          console.warn(
            'clustermgr: ignoring a stream message that is not JSON'
          );
          return;
        }
        if (message.type === 'snapshot') {
          gotSnapshot = true;
          this._seq = message.seq;
          this._lastError = null;
          this._setConnected(true);
          this._setStatus(message.status);
          this._replaceAll(message.clusters ?? [], 'snapshot');
          return;
        }
        if (!gotSnapshot) {
          return;
        }
        if (this._seq !== null && message.seq !== this._seq + 1) {
          // A message got lost: start over with a fresh snapshot.
          console.warn(
            `clustermgr: stream sequence gap (${this._seq} -> ${message.seq}), reconnecting`
          );
          this._closeSocket();
          lost();
          return;
        }
        this._seq = message.seq;
        this._apply(message);
      };

      socket.onclose = () => {
        if (this._socket !== socket) {
          return;
        }
        this._socket = null;
        lost();
      };

      socket.onerror = () => {
        // `onclose` follows and does the work.
      };
    });
  }

  private async _refreshQuietly(): Promise<void> {
    try {
      await this.refresh();
    } catch (error) {
      this._lastError = asServerError(error);
      this._changed.emit({ type: 'error' });
    }
  }

  private _closeSocket(): void {
    const socket = this._socket;
    this._socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      try {
        socket.close();
      } catch {
        // ignore
      }
    }
  }

  private _apply(message: StreamMessage): void {
    switch (message.type) {
      case 'added':
      case 'changed':
        this._removed.delete(message.cluster.id);
        this._upsert(message.cluster, message.type, message.events);
        break;
      case 'removed':
        this._remove(message.id);
        break;
      case 'status':
        this._setStatus(message.status);
        break;
      default:
        break;
    }
  }

  private _setStatus(status: IServerStatus | undefined): void {
    const storeError =
      status && !status.store.writable
        ? (status.store.error ?? trans.__('the store cannot be written'))
        : null;
    if (storeError !== this._storeError) {
      this._storeError = storeError;
      this._changed.emit({ type: 'status' });
    }
  }

  private _replaceAll(
    clusters: ICluster[],
    type: 'snapshot' | 'refresh'
  ): void {
    const next = new Map<string, ICluster>();
    for (const cluster of clusters) {
      next.set(cluster.id, cluster);
    }
    this._clusters = next;
    this._removed.clear();
    for (const id of Array.from(this._history.keys())) {
      if (!next.has(id)) {
        this._history.delete(id);
      }
    }
    for (const cluster of clusters) {
      this._record(cluster);
    }
    this._loaded = true;
    this._changed.emit({ type });
  }

  private _upsert(
    cluster: ICluster,
    type: 'added' | 'changed',
    events?: IEvent[]
  ): void {
    this._clusters.set(cluster.id, cluster);
    this._record(cluster);
    this._loaded = true;
    this._changed.emit({ type, id: cluster.id, events });
  }

  /**
   * Add a point to a cluster's worker history when its counts changed,
   * dropping points older than the history window.
   */
  private _record(cluster: ICluster): void {
    const now = Date.now();
    const points = (this._history.get(cluster.id) ?? []).filter(
      p => now - p.time <= ClustersModel.HISTORY_WINDOW
    );
    const running = cluster.workers?.running ?? 0;
    const requested = cluster.workers?.requested ?? 0;
    const last = points[points.length - 1];
    if (!last || last.running !== running || last.requested !== requested) {
      points.push({ time: now, running, requested });
    }
    this._history.set(cluster.id, points.slice(-ClustersModel.HISTORY_POINTS));
  }

  private _remove(id: string): void {
    this._removed.add(id);
    this._history.delete(id);
    if (this._clusters.delete(id)) {
      this._changed.emit({ type: 'removed', id });
    }
  }

  private _setConnected(value: boolean): void {
    if (this._connected !== value) {
      this._connected = value;
      this._connectionChanged.emit(value);
      this._changed.emit({ type: 'connection' });
    }
  }

  private _settings: ServerConnection.ISettings;
  private _stream: Poll<void, void>;
  private _limits: ILimits | null = null;
  private _clusters = new Map<string, ICluster>();
  private _history = new Map<string, ClustersModel.IHistoryPoint[]>();
  private _serverState: ClustersModel.ServerState = 'unknown';
  private _removed = new Set<string>();
  private _socket: WebSocket | null = null;
  private _seq: number | null = null;
  private _started = false;
  private _connected = false;
  private _loaded = false;
  private _lastError: ClusterManagerError | null = null;
  private _storeError: string | null = null;
  private _isDisposed = false;
  private _changed = new Signal<this, ClustersModel.IChange>(this);
  private _connectionChanged = new Signal<this, boolean>(this);
}

export namespace ClustersModel {
  /**
   * How long the worker history goes back, in ms.
   */
  export const HISTORY_WINDOW = 10 * 60 * 1000;

  /**
   * The most points kept per cluster.
   */
  export const HISTORY_POINTS = 300;

  export type ServerState = IClustersModel.ServerState;
  export type IHistoryPoint = IClustersModel.IHistoryPoint;
  export type IChange = IClustersModel.IChange;

  export interface IOptions {
    /**
     * Server settings (defaults to `ServerConnection.makeSettings()`).
     */
    serverSettings?: ServerConnection.ISettings;

    /**
     * First reconnection delay in ms (default 500).
     */
    reconnectMinDelay?: number;

    /**
     * Largest reconnection delay in ms (default 30000).
     */
    reconnectMaxDelay?: number;
  }
}
