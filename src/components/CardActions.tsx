/**
 * The buttons of a cluster card. Each runs a command with the cluster's id;
 * what a cluster allows comes from its capabilities.
 */
import { CommandRegistry } from '@lumino/commands';
import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

import { capabilitiesOf, offReason } from '../capabilities';
import { CommandIDs } from '../tokens';
import { ICluster } from '../types';

export interface ICardActionsProps {
  cluster: ICluster;
  commands: CommandRegistry;
  /**
   * Whether a Client cell can be inserted (a notebook is open).
   */
  canInsert: boolean;
  /**
   * Whether the server is out of reach: actions that need it are disabled.
   */
  offline: boolean;
  /**
   * A compact card: fewer buttons, a "More…" one opens the context menu.
   */
  compact: boolean;
}

/**
 * Open the card's context menu (which holds every action) below a button.
 */
function openContextMenu(event: React.MouseEvent<HTMLButtonElement>): void {
  const box = event.currentTarget.getBoundingClientRect();
  event.currentTarget.dispatchEvent(
    new MouseEvent('contextmenu', {
      bubbles: true,
      cancelable: true,
      clientX: box.left,
      clientY: box.bottom
    })
  );
}

/**
 * A running (or starting, stopping) cluster's buttons; a stopped one's are
 * History and Remove.
 */
export function CardActions(props: ICardActionsProps): React.ReactElement {
  const { cluster, commands, offline } = props;
  const reachable = !!cluster.scheduler_address;
  const stopped = cluster.status === 'stopped';
  const stopping = cluster.status === 'stopping' || stopped;
  const capabilities = capabilitiesOf(cluster);
  const cannotScale = !reachable || stopping || !capabilities.can_scale;
  const specLocked = offReason(
    cluster,
    'editable_spec',
    'Its Worker Spec cannot be edited'
  );

  // `live` actions need the server (the default): disabled while offline.
  const action = (
    id: string,
    text: string,
    label: string,
    options: {
      disabled?: boolean;
      className?: string;
      live?: boolean;
      title?: string | null;
    } = {}
  ) => (
    <Button
      minimal
      small
      className={`cm-CardAction ${options.className ?? ''}`}
      aria-label={label}
      title={
        options.live !== false && offline
          ? 'Offline: waiting for the server'
          : options.title || commands.caption(id) || label
      }
      disabled={options.disabled || (options.live !== false && offline)}
      onClick={() => void commands.execute(id, { clusterId: cluster.id })}
    >
      {text}
    </Button>
  );

  if (stopped) {
    return (
      <div className="cm-ClusterCard-actions">
        {action(
          CommandIDs.showEvents,
          'History',
          `Event history of ${cluster.name}`,
          { className: 'cm-HistoryButton', live: false }
        )}
        {action(CommandIDs.showLogs, 'Logs', `Logs of ${cluster.name}`, {
          className: 'cm-LogsButton'
        })}
        {/* it shut itself down for being idle: listed, with its history, until removed */}
        {action(CommandIDs.shutdown, 'Remove', `Shut down ${cluster.name}`, {
          className: 'jp-mod-warn cm-ShutdownButton'
        })}
      </div>
    );
  }
  return (
    <div className="cm-ClusterCard-actions">
      {action(
        CommandIDs.openDashboard,
        'Dashboard',
        `Open the dashboard of ${cluster.name}`,
        { disabled: !cluster.dashboard_url, className: 'cm-DashboardButton' }
      )}
      {action(CommandIDs.scale, 'Scale', `Scale ${cluster.name}`, {
        disabled: cannotScale,
        className: 'cm-ScaleButton'
      })}
      {action(
        CommandIDs.adapt,
        'Adaptive',
        `Adaptive mode of ${cluster.name}`,
        {
          disabled: cannotScale,
          className: 'cm-AdaptButton'
        }
      )}
      {action(
        CommandIDs.editSpec,
        'Spec',
        `Edit the Worker Spec of ${cluster.name}`,
        {
          disabled: cannotScale || !!specLocked,
          className: 'cm-SpecButton',
          title: specLocked && `Spec: ${specLocked}`
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
      {!props.compact &&
        capabilities.can_stop &&
        action(CommandIDs.showLogs, 'Logs', `Logs of ${cluster.name}`, {
          className: 'cm-LogsButton'
        })}
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
        stopping ? 'Stopping…' : capabilities.can_stop ? 'Shut down' : 'Detach',
        `Shut down ${cluster.name}`,
        { disabled: stopping, className: 'jp-mod-warn cm-ShutdownButton' }
      )}
    </div>
  );
}
