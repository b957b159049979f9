import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import * as React from 'react';

import { DRAG_THRESHOLD, startClusterDrag } from './clientcell';
import { formatBytes, formatCores } from './format';
import { clusterIcon } from './icons';
import { ClustersModel } from './model';
import { ClusterManagerError } from './request';
import { ICluster } from './types';

/**
 * The id of the sidebar widget (and the DOM node).
 */
export const SIDEBAR_ID = 'clustermgr-sidebar';

/**
 * The left-panel sidebar listing the server's clusters.
 */
export class ClusterSidebar extends ReactWidget {
  constructor(options: ClusterSidebar.IOptions) {
    super();
    this._model = options.model;
    this._onInsert = options.onInsertClientCell ?? null;
    this.id = SIDEBAR_ID;
    this.addClass('cm-Sidebar');
    this.title.icon = clusterIcon;
    this.title.caption = 'Clusters';
    this.title.label = 'Clusters';
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'Clusters');
  }

  get model(): ClustersModel {
    return this._model;
  }

  /**
   * Ask for a new cluster with the first template the server offers
   * (or the server's default when it offers none).
   */
  async newCluster(): Promise<ICluster> {
    let template: string | undefined;
    try {
      const templates = await this._model.listTemplates();
      template = templates[0]?.name;
    } catch (error) {
      // The server's default template will do.
      template = undefined;
    }
    return this._model.createCluster(template ? { template } : {});
  }

  protected render(): React.ReactElement {
    return (
      <UseSignal signal={this._model.changed} initialArgs={{ type: 'refresh' }}>
        {() => (
          <ClusterPanel
            model={this._model}
            onNewCluster={() => this.newCluster()}
            onShutdown={id => this._model.shutdownCluster(id)}
            onInsert={this._onInsert}
            onDragStart={(cluster, x, y) =>
              startClusterDrag({ cluster, clientX: x, clientY: y, source: this })
            }
          />
        )}
      </UseSignal>
    );
  }

  private _model: ClustersModel;
  private _onInsert: ((cluster: ICluster) => void) | null;
}

export namespace ClusterSidebar {
  export interface IOptions {
    model: ClustersModel;
    /**
     * Insert a client cell for a cluster into the current notebook
     * (shows an "Insert client code" button on the cards when given).
     */
    onInsertClientCell?: (cluster: ICluster) => void;
  }
}

interface IClusterPanelProps {
  model: ClustersModel;
  onNewCluster: () => Promise<unknown>;
  onShutdown: (id: string) => Promise<unknown>;
  onInsert: ((cluster: ICluster) => void) | null;
  onDragStart: (cluster: ICluster, clientX: number, clientY: number) => void;
}

function errorMessage(error: unknown): string {
  if (error instanceof ClusterManagerError) {
    return error.field ? `${error.message} (${error.field})` : error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Header, error line and the list of cluster cards.
 */
function ClusterPanel(props: IClusterPanelProps): React.ReactElement {
  const { model } = props;
  const [creating, setCreating] = React.useState(false);
  const [error, setError] = React.useState<string | null>(null);
  const [stopping, setStopping] = React.useState<ReadonlySet<string>>(
    new Set()
  );

  const newCluster = async () => {
    setCreating(true);
    setError(null);
    try {
      await props.onNewCluster();
    } catch (e) {
      setError(`Could not start a cluster: ${errorMessage(e)}`);
    } finally {
      setCreating(false);
    }
  };

  const shutdown = async (cluster: ICluster) => {
    setError(null);
    setStopping(prev => new Set(prev).add(cluster.id));
    try {
      await props.onShutdown(cluster.id);
    } catch (e) {
      setError(`Could not shut down ${cluster.name}: ${errorMessage(e)}`);
      setStopping(prev => {
        const next = new Set(prev);
        next.delete(cluster.id);
        return next;
      });
    }
  };

  const clusters = model.clusters;
  const streamError = !model.connected ? model.lastError : null;

  return (
    <div className="cm-ClusterPanel">
      <div className="cm-ClusterPanel-header">
        <h2 className="cm-ClusterPanel-title">Clusters</h2>
        <span
          className="cm-ConnectionState"
          data-connected={model.connected ? 'true' : 'false'}
          role="status"
          aria-label={
            model.connected ? 'Live updates connected' : 'Live updates offline'
          }
          title={
            model.connected
              ? 'Live updates connected'
              : 'Live updates offline, reconnecting'
          }
        />
        <button
          type="button"
          className="jp-mod-styled jp-mod-accept cm-NewClusterButton"
          aria-label="New Cluster"
          title="Start a new cluster with the first template"
          disabled={creating}
          onClick={() => void newCluster()}
        >
          {creating ? 'Starting…' : 'New Cluster'}
        </button>
      </div>
      {(error || streamError) && (
        <div className="cm-ClusterPanel-error" role="alert">
          {error ?? `Cannot reach the cluster manager: ${streamError!.message}`}
        </div>
      )}
      {clusters.length === 0 ? (
        <p className="cm-ClusterPanel-empty">
          {model.loaded
            ? 'No clusters. Start one with New Cluster.'
            : 'Loading clusters…'}
        </p>
      ) : (
        <ul className="cm-ClusterList" aria-label="Cluster list">
          {clusters.map(cluster => (
            <ClusterCard
              key={cluster.id}
              cluster={cluster}
              stopping={stopping.has(cluster.id)}
              onShutdown={() => void shutdown(cluster)}
              onInsert={props.onInsert}
              onDragStart={props.onDragStart}
            />
          ))}
        </ul>
      )}
      {clusters.length > 0 && (
        <p className="cm-ClusterPanel-hint">
          Drag a cluster into a notebook to connect a client.
        </p>
      )}
    </div>
  );
}

interface IClusterCardProps {
  cluster: ICluster;
  stopping: boolean;
  onShutdown: () => void;
  onInsert: ((cluster: ICluster) => void) | null;
  onDragStart: (cluster: ICluster, clientX: number, clientY: number) => void;
}

/**
 * One cluster: name, status, address, workers, resources, actions.
 * Dragging the card into a notebook inserts a client cell.
 */
function ClusterCard(props: IClusterCardProps): React.ReactElement {
  const { cluster } = props;
  const workers = cluster.workers ?? { running: 0, pending: 0, requested: 0 };
  const resources = cluster.resources ?? { cores: 0, memory: 0, gpus: 0 };
  const draggable = !!cluster.scheduler_address;
  const stopping = props.stopping || cluster.status === 'stopping';

  const onPointerDown = (event: React.PointerEvent<HTMLLIElement>) => {
    if (event.button !== 0 || !draggable) {
      return;
    }
    if ((event.target as HTMLElement).closest('button, a, input, select')) {
      return;
    }
    const startX = event.clientX;
    const startY = event.clientY;
    const onMove = (e: PointerEvent) => {
      if (
        Math.abs(e.clientX - startX) >= DRAG_THRESHOLD ||
        Math.abs(e.clientY - startY) >= DRAG_THRESHOLD
      ) {
        cleanup();
        props.onDragStart(cluster, e.clientX, e.clientY);
      }
    };
    const cleanup = () => {
      document.removeEventListener('pointermove', onMove, true);
      document.removeEventListener('pointerup', cleanup, true);
      document.removeEventListener('pointercancel', cleanup, true);
    };
    document.addEventListener('pointermove', onMove, true);
    document.addEventListener('pointerup', cleanup, true);
    document.addEventListener('pointercancel', cleanup, true);
  };

  return (
    <li
      className={`cm-ClusterCard${draggable ? ' cm-mod-draggable' : ''}`}
      data-cluster-id={cluster.id}
      data-status={cluster.status}
      aria-label={`Cluster ${cluster.name}`}
      title={draggable ? 'Drag into a notebook to insert a client' : undefined}
      onPointerDown={onPointerDown}
    >
      <div className="cm-ClusterCard-header">
        <span className="cm-ClusterCard-name">{cluster.name}</span>
        <span
          className={`cm-StatusBadge cm-StatusBadge-${cluster.status}`}
          aria-label={`Status: ${cluster.status}`}
        >
          {cluster.status}
        </span>
      </div>
      {cluster.status === 'failed' && cluster.error && (
        <div className="cm-ClusterCard-error" role="alert">
          {cluster.error}
        </div>
      )}
      <dl className="cm-ClusterCard-details">
        <dt>Scheduler</dt>
        <dd className="cm-ClusterCard-address">
          <code>{cluster.scheduler_address ?? '–'}</code>
        </dd>
        <dt>Workers</dt>
        <dd
          className="cm-ClusterCard-workers"
          aria-label={`Workers: ${workers.running} running, ${workers.pending} pending`}
        >
          <span className="cm-ClusterCard-workersRunning">
            {workers.running}
          </span>{' '}
          running,{' '}
          <span className="cm-ClusterCard-workersPending">
            {workers.pending}
          </span>{' '}
          pending
        </dd>
        <dt>Cores</dt>
        <dd className="cm-ClusterCard-cores">{formatCores(resources.cores)}</dd>
        <dt>Memory</dt>
        <dd className="cm-ClusterCard-memory">
          {formatBytes(resources.memory)}
        </dd>
        {resources.gpus > 0 && (
          <>
            <dt>GPUs</dt>
            <dd className="cm-ClusterCard-gpus">{resources.gpus}</dd>
          </>
        )}
      </dl>
      <div className="cm-ClusterCard-actions">
        {props.onInsert && (
          <button
            type="button"
            className="jp-mod-styled cm-InsertButton"
            aria-label={`Insert client code for ${cluster.name}`}
            title="Insert a cell connecting a client to this cluster into the current notebook"
            disabled={!draggable}
            onClick={() => props.onInsert?.(cluster)}
          >
            Insert client
          </button>
        )}
        <button
          type="button"
          className="jp-mod-styled jp-mod-warn cm-ShutdownButton"
          aria-label={`Shut down ${cluster.name}`}
          disabled={stopping}
          onClick={props.onShutdown}
        >
          {stopping ? 'Stopping…' : 'Shut down'}
        </button>
      </div>
    </li>
  );
}
