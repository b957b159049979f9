/**
 * Dask dashboard pages (the full dashboard, or one of its individual plots)
 * as JupyterLab tabs, through the server's authenticated proxy. A tab follows
 * its cluster on the model: once the cluster is gone it says so, once, and
 * drops its frame so that nothing keeps requesting a dead scheduler.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { onlyObserved } from './capabilities';
import { ClustersModel } from './model';
import { ClusterManagerError } from './request';
import { ICluster } from './types';
import { trans } from './i18n';

/**
 * The path of the full dashboard below a cluster's proxy path.
 */
export const STATUS_PATH = '/status';

/**
 * One individual plot a scheduler's dashboard offers.
 */
export interface IPlot {
  /** Its name without the "Individual " prefix, e.g. "Task Stream". */
  label: string;
  /** Its path below the dashboard, e.g. "/individual-task-stream". */
  path: string;
}

/**
 * The URL of a page of a cluster's dashboard, through this server's proxy.
 */
export function dashboardUrl(
  settings: ServerConnection.ISettings,
  clusterId: string,
  path: string
): string {
  return URLExt.join(
    settings.baseUrl,
    'clustermgr/dashboard',
    encodeURIComponent(clusterId),
    path
  );
}

/**
 * The individual plots of a cluster's dashboard, from its scheduler's
 * `individual-plots.json`, in the scheduler's order.
 */
export async function fetchPlots(
  settings: ServerConnection.ISettings,
  clusterId: string
): Promise<IPlot[]> {
  const response = await ServerConnection.makeRequest(
    dashboardUrl(settings, clusterId, 'individual-plots.json'),
    {},
    settings
  );
  if (!response.ok) {
    throw await ClusterManagerError.fromResponse(response);
  }
  const plots = (await response.json()) as { [name: string]: string };
  return Object.entries(plots).map(([name, path]) => ({
    label: name.replace(/^Individual\s+/, ''),
    path: path.startsWith('/') ? path : `/${path}`
  }));
}

/**
 * The DOM id of the tab showing `path` of a cluster's dashboard.
 */
export function dashboardTabId(clusterId: string, path: string): string {
  if (path === STATUS_PATH) {
    return `clustermgr-dashboard-${clusterId}`;
  }
  const slug = path.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');
  return `clustermgr-plot-${clusterId}-${slug}`;
}

/**
 * The label of a dashboard tab: "Dask <cluster>", or "<plot> · <cluster>".
 */
export function tabLabel(path: string, label: string, cluster: string): string {
  return path === STATUS_PATH
    ? trans.__('Dask %1', cluster)
    : trans.__('%1 · %2', label, cluster);
}

/**
 * Why a cluster's dashboard cannot be shown any more, or null while it can
 * (or may soon: a pending cluster has no dashboard yet).
 */
export function goneReason(
  cluster: ICluster | undefined,
  loaded: boolean
): string | null {
  if (!cluster) {
    return loaded ? trans.__('it is no longer listed') : null;
  }
  if (cluster.status === 'failed') {
    return cluster.error
      ? trans.__('it failed: %1', cluster.error)
      : trans.__('it failed');
  }
  if (cluster.status === 'stopping' || cluster.status === 'stopped') {
    return onlyObserved(cluster)
      ? trans.__('it was detached')
      : trans.__('it was shut down');
  }
  return null;
}

/**
 * A page of a cluster's dashboard in a frame, until the cluster is gone.
 */
export class DashboardView extends Widget {
  constructor(options: DashboardView.IOptions) {
    super();
    this.clusterId = options.clusterId;
    this.path = options.path;
    this.label = options.label;
    this._clusterName = options.clusterName ?? null;
    this._model = options.model;
    this.addClass('cm-DashboardView');
    // A tab restored after its cluster went keeps the name it was saved with.
    this.title.label = tabLabel(
      this.path,
      this.label,
      this._clusterName ?? 'cluster'
    );
    this._message = document.createElement('div');
    this._message.className = 'cm-DashboardView-message';
    this._message.setAttribute('role', 'status');
    this.node.appendChild(this._message);
    this._model.changed.connect(this._update, this);
    this._update();
  }

  readonly clusterId: string;
  readonly path: string;
  readonly label: string;

  /**
   * The cluster's name as last seen (kept for the layout restorer), or null
   * when it was never seen.
   */
  get clusterName(): string | null {
    return this._clusterName;
  }

  /**
   * Whether the cluster is gone (the frame is dropped for good).
   */
  get gone(): boolean {
    return this._gone;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._model.changed.disconnect(this._update, this);
    super.dispose();
  }

  private _update(): void {
    if (this._gone) {
      return;
    }
    const cluster = this._model.get(this.clusterId);
    if (cluster) {
      this._clusterName = cluster.name;
      this.title.label = tabLabel(this.path, this.label, cluster.name);
    }
    const reason = goneReason(cluster, this._model.loaded);
    if (reason) {
      this._setGone(this._clusterName, reason);
      return;
    }
    if (!this._frame && cluster?.dashboard_url) {
      this._message.textContent = '';
      this._frame = document.createElement('iframe');
      this._frame.className = 'cm-DashboardView-frame';
      this._frame.title = trans.__('%1 of %2', this.label, cluster.name);
      this._frame.setAttribute(
        'sandbox',
        'allow-scripts allow-same-origin allow-forms allow-popups'
      );
      this._frame.src = dashboardUrl(
        this._model.serverSettings,
        this.clusterId,
        this.path
      );
      this.node.appendChild(this._frame);
    } else if (!this._frame) {
      this._message.textContent = cluster
        ? trans.__('Waiting for the dashboard of %1…', cluster.name)
        : 'Loading…';
    }
  }

  /**
   * Say once why the page stopped, and drop the frame: Bokeh's reconnection
   * attempts stop with it.
   */
  private _setGone(name: string | null, reason: string): void {
    this._gone = true;
    this._model.changed.disconnect(this._update, this);
    if (this._frame) {
      this._frame.src = 'about:blank';
      this._frame.remove();
      this._frame = null;
    }
    this.addClass('cm-mod-gone');
    const cluster =
      name === null
        ? trans.__('The cluster')
        : /^cluster\b/i.test(name)
          ? name
          : trans.__('Cluster %1', name);
    this._message.textContent =
      this.path === STATUS_PATH
        ? trans.__(
            '%1 is gone (%2); this dashboard no longer updates.',
            cluster,
            reason
          )
        : trans.__(
            '%1 is gone (%2); this plot no longer updates.',
            cluster,
            reason
          );
  }

  private _model: ClustersModel;
  private _clusterName: string | null;
  private _message: HTMLDivElement;
  private _frame: HTMLIFrameElement | null = null;
  private _gone = false;
}

export namespace DashboardView {
  export interface IOptions {
    model: ClustersModel;
    clusterId: string;
    /** e.g. "/status" or "/individual-task-stream". */
    path: string;
    /** e.g. "Task Stream". */
    label: string;
    /** The cluster's name when last seen (a restored tab's title). */
    clusterName?: string;
  }
}
