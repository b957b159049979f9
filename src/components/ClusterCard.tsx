/**
 * One cluster in the sidebar: a card made of its header, numbers, chart and
 * actions, that can be dragged into a notebook to insert a Client cell.
 */
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { shownStatus } from '../cardstate';
import { groupMemory } from '../events';
import { DRAG_THRESHOLD } from '../clientcell';
import { trans } from '../i18n';
import { ClustersModel } from '../model';
import { CommandIDs } from '../tokens';
import { ICluster } from '../types';
import { CardActions } from './CardActions';
import { CardWorkers } from './CardWorkers';
import { CardEnded, CardErrors, CardHeader, CardScheduler } from './CardHeader';
import { CardDecision, CardDeparture, CardDetails } from './CardNumbers';
import { ClusterChart } from './ClusterChart';
import { DashboardPlots } from './DashboardPlots';
import { Sparkline } from './Sparkline';

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
  /**
   * The card commands from the palette, the main menu and shortcuts act on.
   */
  selected?: boolean;
  onDragStart: (cluster: ICluster, clientX: number, clientY: number) => void;
}

/**
 * Pointer handlers that start a drag of the card once the pointer has moved
 * past the drag threshold (never from a button, link or input).
 */
function dragHandlers(
  cluster: ICluster,
  onDragStart: IClusterCardProps['onDragStart']
): Pick<
  React.LiHTMLAttributes<HTMLLIElement>,
  'onPointerDown' | 'onMouseDown'
> {
  const startsDrag = (event: React.MouseEvent<HTMLLIElement>) =>
    event.button === 0 &&
    !!cluster.scheduler_address &&
    !(event.target as HTMLElement).closest('button, a, input, select');
  return {
    // Pressing on the card starts no text selection (which a drag across the
    // page would extend), but still focuses the card.
    onMouseDown: event => {
      if (startsDrag(event)) {
        event.preventDefault();
        event.currentTarget.focus();
      }
    },
    onPointerDown: event => {
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
          onDragStart(cluster, e.clientX, e.clientY);
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
    }
  };
}

/**
 * One cluster: status, scheduler address (copy), workers running and
 * pending, resources, adaptive state with its last decision and a chart of
 * workers, and its actions. Dragging it into a notebook inserts a Client
 * cell; its context menu holds the same actions.
 */
export function ClusterCard(props: IClusterCardProps): React.ReactElement {
  const { cluster, commands } = props;
  const reachable = !!cluster.scheduler_address;
  const stopped = cluster.status === 'stopped';

  return (
    <li
      className={`cm-ClusterCard${reachable ? ' cm-mod-draggable' : ''}${
        props.compact ? ' cm-mod-compact' : ''
      }${props.selected ? ' cm-mod-selected' : ''}`}
      aria-current={props.selected ? 'true' : undefined}
      data-cluster-id={cluster.id}
      data-status={cluster.status}
      tabIndex={0}
      aria-label={trans.__(
        'Cluster %1, %2',
        cluster.name,
        shownStatus(cluster)
      )}
      title={
        reachable
          ? trans.__(
              'Drag into a notebook to insert a Client cell; right-click for more'
            )
          : undefined
      }
      {...dragHandlers(cluster, props.onDragStart)}
    >
      <CardHeader cluster={cluster} />
      <CardErrors cluster={cluster} />
      <CardEnded cluster={cluster} />
      <CardScheduler
        cluster={cluster}
        onCopy={() =>
          void commands.execute(CommandIDs.copyAddress, {
            clusterId: cluster.id
          })
        }
      />
      <CardDetails cluster={cluster} />
      <CardDecision
        decision={cluster.last_decision}
        perWorkerMemory={groupMemory(cluster, cluster.last_decision?.group)}
        shownErrors={[
          cluster.error,
          ...(cluster.workers.groups ?? []).map(g => g.error)
        ]}
      />
      <CardDeparture
        departure={cluster.last_departure}
        onOpenLog={worker =>
          void commands.execute(CommandIDs.showLogs, {
            clusterId: cluster.id,
            name: worker
          })
        }
      />
      {!props.compact && (
        <div className="cm-ClusterCard-chart">
          <span className="cm-ClusterCard-chartLabel" aria-hidden="true">
            {trans.__('Workers')}
          </span>
          <ClusterChart
            cluster={cluster}
            fallback={<Sparkline points={props.history} />}
          />
        </div>
      )}
      <CardActions
        cluster={cluster}
        commands={commands}
        canInsert={props.canInsert}
        offline={!!props.offline}
        compact={!!props.compact}
      />
      {!stopped && (
        <div className="cm-ClusterCard-disclosures">
          <DashboardPlots cluster={cluster} commands={commands} />
          <CardWorkers cluster={cluster} />
        </div>
      )}
    </li>
  );
}
