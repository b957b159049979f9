import { CommandRegistry } from '@lumino/commands';
import { Button, copyIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { DRAG_THRESHOLD } from '../clientcell';
import { formatSize, formatTime, plural } from '../format';
import { ClustersModel } from '../model';
import { CommandIDs } from '../tokens';
import { IAdaptRange, ICluster, IEvent } from '../types';
import {
  blockedByClientData,
  GroupCounts,
  SchedulerAddress,
  ShrinkHint
} from './CardParts';
import { DashboardPlots } from './DashboardPlots';
import { ExternalBadge, isExternal } from './ExternalBadge';
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
  /**
   * Whether the server is out of reach: actions that need it are disabled.
   */
  offline?: boolean;
  /**
   * Many clusters: a shorter card without the chart.
   */
  compact?: boolean;
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
  if (range.unit === 'memory') {
    return `${range.group} ${formatSize(range.minimum)}–${formatSize(range.maximum)}`;
  }
  return `${range.group} ${range.minimum}–${range.maximum} ${range.unit}`;
}

/**
 * "2 → 4 workers (default)", for a scaling decision.
 */
function decisionChange(event: IEvent): string {
  if (event.before === null || event.after === null) {
    return '';
  }
  const group = event.group ? ` (${event.group})` : '';
  return `${event.before} → ${plural(event.after, 'worker')}${group}`;
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
  const stopped = cluster.status === 'stopped';
  const stopping = cluster.status === 'stopping' || stopped;
  const offline = !!props.offline;
  const external = isExternal(cluster); // observed, never scaled or stopped
  const run = (id: string) =>
    void commands.execute(id, { clusterId: cluster.id });
  const decision = cluster.last_decision;

  const startsDrag = (event: React.MouseEvent<HTMLLIElement>) =>
    event.button === 0 &&
    reachable &&
    !(event.target as HTMLElement).closest('button, a, input, select');
  // Pressing on the card starts no text selection (which a drag across the
  // page would extend), but still focuses the card.
  const onMouseDown = (event: React.MouseEvent<HTMLLIElement>) => {
    if (startsDrag(event)) {
      event.preventDefault();
      event.currentTarget.focus();
    }
  };
  const onPointerDown = (event: React.PointerEvent<HTMLLIElement>) => {
    if (!startsDrag(event)) {
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
        window.getSelection()?.removeAllRanges();
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

  // The card's context menu holds every action; compact cards open it here.
  const openContextMenu = (event: React.MouseEvent<HTMLButtonElement>) => {
    const box = event.currentTarget.getBoundingClientRect();
    event.currentTarget.dispatchEvent(
      new MouseEvent('contextmenu', {
        bubbles: true,
        cancelable: true,
        clientX: box.left,
        clientY: box.bottom
      })
    );
  };

  // `live` actions need the server (the default): disabled while offline.
  const action = (
    id: string,
    text: string,
    label: string,
    options: { disabled?: boolean; className?: string; live?: boolean } = {}
  ) => (
    <Button
      minimal
      small
      className={`cm-CardAction ${options.className ?? ''}`}
      aria-label={label}
      title={
        options.live !== false && offline
          ? 'Offline: waiting for the server'
          : commands.caption(id) || label
      }
      disabled={options.disabled || (options.live !== false && offline)}
      onClick={() => run(id)}
    >
      {text}
    </Button>
  );

  return (
    <li
      className={`cm-ClusterCard${reachable ? ' cm-mod-draggable' : ''}${
        props.compact ? ' cm-mod-compact' : ''
      }`}
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
      onMouseDown={onMouseDown}
    >
      <div className="cm-ClusterCard-header">
        <span className="cm-ClusterCard-name" title={cluster.name}>
          {cluster.name}
        </span>
        <span className="cm-ClusterCard-template" title={cluster.template}>
          {cluster.template}
        </span>
        <ExternalBadge cluster={cluster} />
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
        <SchedulerAddress
          address={cluster.scheduler_address}
          clusterName={cluster.name}
        />
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
        <GroupCounts groups={workers.groups ?? []} />
        <dt>Resources</dt>
        <dd className="cm-ClusterCard-resources">
          <span className="cm-ClusterCard-cores">
            {plural(resources.cores, 'core')}
          </span>{' '}
          ·{' '}
          <span className="cm-ClusterCard-memory">
            {formatSize(resources.memory)}
          </span>{' '}
          ·{' '}
          <span className="cm-ClusterCard-gpus">
            {plural(resources.gpus, 'GPU')}
          </span>
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
      {blockedByClientData(decision) && <ShrinkHint />}
      {!props.compact && (
        <div className="cm-ClusterCard-chart">
          <span className="cm-ClusterCard-chartLabel" aria-hidden="true">
            Workers
          </span>
          <Sparkline points={props.history} />
        </div>
      )}
      {stopped ? (
        <div className="cm-ClusterCard-actions">
          {action(
            CommandIDs.showEvents,
            'History',
            `Event history of ${cluster.name}`,
            { className: 'cm-HistoryButton', live: false }
          )}
          {/* it shut itself down for being idle: listed, with its history, until removed */}
          {action(CommandIDs.shutdown, 'Remove', `Shut down ${cluster.name}`, {
            className: 'jp-mod-warn cm-ShutdownButton'
          })}
        </div>
      ) : (
      <div className="cm-ClusterCard-actions">
        {action(
          CommandIDs.openDashboard,
          'Dashboard',
          `Open the dashboard of ${cluster.name}`,
          { disabled: !cluster.dashboard_url, className: 'cm-DashboardButton' }
        )}
        {action(CommandIDs.scale, 'Scale', `Scale ${cluster.name}`, {
          disabled: !reachable || stopping || external,
          className: 'cm-ScaleButton'
        })}
        {action(
          CommandIDs.adapt,
          'Adaptive',
          `Adaptive mode of ${cluster.name}`,
          {
            disabled: !reachable || stopping || external,
            className: 'cm-AdaptButton'
          }
        )}
        {action(
          CommandIDs.editSpec,
          'Spec',
          `Edit the Worker Spec of ${cluster.name}`,
          {
            disabled: !reachable || stopping || external,
            className: 'cm-SpecButton'
          }
        )}
        {props.canInsert &&
          action(
            CommandIDs.insertClientCell,
            'Insert client',
            `Insert client code for ${cluster.name}`,
            { disabled: !reachable, className: 'cm-InsertButton', live: false }
          )}
        {action(
          CommandIDs.showEvents,
          'History',
          `Event history of ${cluster.name}`,
          { className: 'cm-HistoryButton' }
        )}
        {props.compact && (
          <Button
            minimal
            small
            className="cm-CardAction cm-MoreButton"
            aria-label={`More actions for ${cluster.name}`}
            aria-haspopup="menu"
            title="All actions (also: right-click the card, or Shift+F10)"
            onClick={openContextMenu}
          >
            More…
          </Button>
        )}
        {action(
          CommandIDs.shutdown,
          stopping ? 'Stopping…' : external ? 'Detach' : 'Shut down',
          `Shut down ${cluster.name}`,
          { disabled: stopping, className: 'jp-mod-warn cm-ShutdownButton' }
        )}
      </div>
      )}
      {!stopped && <DashboardPlots cluster={cluster} commands={commands} />}
    </li>
  );
}
