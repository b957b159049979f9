import { CommandRegistry } from '@lumino/commands';
import { Button, copyIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { DRAG_THRESHOLD } from '../clientcell';
import { formatBytes, formatCores, formatSize, formatTime } from '../format';
import { ClustersModel } from '../model';
import { CommandIDs } from '../tokens';
import { IAdaptRange, ICluster, IEvent } from '../types';
import { Sparkline } from './Sparkline';
import { formatOptions } from './UserOptionsFields';

export interface IClusterCardProps {
  cluster: ICluster;
  history: ReadonlyArray<ClustersModel.IHistoryPoint>;
  commands: CommandRegistry;
  /**
   * Whether a Client cell can be inserted (a notebook is open).
   */
  canInsert: boolean;
  onDragStart: (cluster: ICluster, clientX: number, clientY: number) => void;
}

/**
 * "2 pending — Resources", or "2 pending — 1 Resources, 1 Priority".
 */
export function pendingText(
  pending: number,
  reasons: { [reason: string]: number } | undefined
): string {
  const entries = Object.entries(reasons ?? {});
  if (!pending || !entries.length) {
    return `${pending} pending`;
  }
  const why =
    entries.length === 1
      ? entries[0][0]
      : entries.map(([reason, n]) => `${n} ${reason}`).join(', ');
  return `${pending} pending — ${why}`;
}

function rangeText(range: IAdaptRange): string {
  const amount = (v: number) =>
    range.unit === 'memory' ? formatSize(v) : String(v);
  const unit = range.unit === 'memory' ? '' : ` ${range.unit}`;
  const span = `${amount(range.minimum)}–${amount(range.maximum)}`;
  return `${range.group} ${span}${unit}`;
}

/**
 * "2 → 4 workers (default)", for a scaling decision.
 */
function decisionChange(event: IEvent): string {
  if (event.before === null || event.after === null) {
    return '';
  }
  const group = event.group ? ` (${event.group})` : '';
  return `${event.before} → ${event.after} workers${group}`;
}

/**
 * One cluster: status, scheduler address (copy), workers running and
 * pending, resources, adaptive state with its last decision and a chart of
 * workers, and its actions. Dragging it into a notebook inserts a Client
 * cell; its context menu holds the same actions.
 */
export function ClusterCard(props: IClusterCardProps): React.ReactElement {
  const { cluster, commands } = props;
  const { workers, resources } = cluster;
  const reachable = !!cluster.scheduler_address;
  const stopping = cluster.status === 'stopping' || cluster.status === 'stopped';
  const run = (id: string) =>
    void commands.execute(id, { clusterId: cluster.id });
  const decision = cluster.last_decision;

  const onPointerDown = (event: React.PointerEvent<HTMLLIElement>) => {
    if (event.button !== 0 || !reachable) {
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

  const action = (
    id: string,
    text: string,
    label: string,
    options: { disabled?: boolean; className?: string } = {}
  ) => (
    <Button
      minimal
      small
      className={`cm-CardAction ${options.className ?? ''}`}
      aria-label={label}
      title={commands.caption(id) || label}
      disabled={options.disabled}
      onClick={() => run(id)}
    >
      {text}
    </Button>
  );

  return (
    <li
      className={`cm-ClusterCard${reachable ? ' cm-mod-draggable' : ''}`}
      data-cluster-id={cluster.id}
      data-status={cluster.status}
      tabIndex={0}
      aria-label={`Cluster ${cluster.name}, ${cluster.status}`}
      title={
        reachable
          ? 'Drag into a notebook to insert a Client cell; right-click for more'
          : undefined
      }
      onPointerDown={onPointerDown}
    >
      <div className="cm-ClusterCard-header">
        <span className="cm-ClusterCard-name">{cluster.name}</span>
        <span className="cm-ClusterCard-template">{cluster.template}</span>
        <span
          className={`cm-StatusBadge cm-StatusBadge-${cluster.status}`}
          aria-label={`Status: ${cluster.status}`}
        >
          {cluster.status}
        </span>
      </div>
      {cluster.error && (
        <div className="cm-ClusterCard-error" role="alert">
          {cluster.error}
        </div>
      )}
      {workers.groups
        .filter(g => g.error && g.error !== cluster.error)
        .map(g => (
          <div key={g.name} className="cm-ClusterCard-error" role="alert">
            {`${g.name}: ${g.error}`}
          </div>
        ))}
      <div className="cm-ClusterCard-scheduler">
        <code
          className="cm-ClusterCard-address"
          aria-label={`Scheduler address of ${cluster.name}`}
        >
          {cluster.scheduler_address ?? 'no scheduler yet'}
        </code>
        {reachable && (
          <button
            type="button"
            className="jp-mod-styled cm-IconButton cm-CopyAddress"
            aria-label={`Copy the scheduler address of ${cluster.name}`}
            title="Copy the scheduler address"
            onClick={() => run(CommandIDs.copyAddress)}
          >
            <copyIcon.react tag="span" />
          </button>
        )}
      </div>
      <dl className="cm-ClusterCard-details">
        <dt>Workers</dt>
        <dd
          className="cm-ClusterCard-workers"
          aria-label={`Workers: ${workers.running} running, ${pendingText(workers.pending, workers.pending_reasons)}`}
        >
          <span className="cm-ClusterCard-workersRunning">
            {workers.running}
          </span>{' '}
          running,{' '}
          <span
            className="cm-ClusterCard-workersPending"
            title={(workers.waiting ?? [])
              .map(w => `${w.name}: job ${w.job_id ?? '?'} ${w.reason}`)
              .join('\n')}
          >
            {pendingText(workers.pending, workers.pending_reasons)}
          </span>
        </dd>
        <dt>Resources</dt>
        <dd className="cm-ClusterCard-resources">
          <span className="cm-ClusterCard-cores">
            {formatCores(resources.cores)}
          </span>{' '}
          cores ·{' '}
          <span className="cm-ClusterCard-memory">
            {formatBytes(resources.memory)}
          </span>{' '}
          ·{' '}
          <span className="cm-ClusterCard-gpus">{resources.gpus}</span> GPU
          {resources.gpus === 1 ? '' : 's'}
        </dd>
        {Object.keys(cluster.options ?? {}).length > 0 && (
          <>
            <dt>Options</dt>
            <dd className="cm-ClusterCard-options">
              {formatOptions(cluster.options)}
            </dd>
          </>
        )}
        <dt>Adaptive</dt>
        <dd className="cm-ClusterCard-adapt" data-adaptive={!!cluster.adapt}>
          {cluster.adapt
            ? `on · ${cluster.adapt.groups.map(rangeText).join(', ')}`
            : 'off'}
        </dd>
      </dl>
      {decision && (
        <div className="cm-ClusterCard-decision" aria-label="Last decision">
          <span className="cm-ClusterCard-decisionChange">
            {decisionChange(decision)}
          </span>{' '}
          <span className="cm-ClusterCard-decisionReason">
            {decision.message}
          </span>{' '}
          <span className="cm-ClusterCard-decisionMeta">
            {[decision.source, formatTime(decision.time)]
              .filter(Boolean)
              .join(' · ')}
          </span>
        </div>
      )}
      <div className="cm-ClusterCard-chart">
        <span className="cm-ClusterCard-chartLabel" aria-hidden="true">
          Workers
        </span>
        <Sparkline points={props.history} />
      </div>
      <div className="cm-ClusterCard-actions">
        {action(
          CommandIDs.openDashboard,
          'Dashboard',
          `Open the dashboard of ${cluster.name}`,
          { disabled: !cluster.dashboard_url, className: 'cm-DashboardButton' }
        )}
        {action(CommandIDs.scale, 'Scale', `Scale ${cluster.name}`, {
          disabled: !reachable || stopping,
          className: 'cm-ScaleButton'
        })}
        {action(
          CommandIDs.adapt,
          'Adaptive',
          `Adaptive mode of ${cluster.name}`,
          { disabled: !reachable || stopping, className: 'cm-AdaptButton' }
        )}
        {action(
          CommandIDs.editSpec,
          'Spec',
          `Edit the Worker Spec of ${cluster.name}`,
          { disabled: !reachable || stopping, className: 'cm-SpecButton' }
        )}
        {props.canInsert &&
          action(
            CommandIDs.insertClientCell,
            'Insert client',
            `Insert client code for ${cluster.name}`,
            { disabled: !reachable, className: 'cm-InsertButton' }
          )}
        {action(
          CommandIDs.shutdown,
          stopping ? 'Stopping…' : 'Shut down',
          `Shut down ${cluster.name}`,
          { disabled: stopping, className: 'jp-mod-warn cm-ShutdownButton' }
        )}
      </div>
    </li>
  );
}
