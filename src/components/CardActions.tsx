/**
 * The buttons of a cluster card. Each runs a command with the cluster's id;
 * what a cluster allows comes from its capabilities.
 */
import { CommandRegistry } from '@lumino/commands';
import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

import { capabilitiesOf, offReason } from '../capabilities';
import {
  canRestart,
  hasEnded,
  removalLabel,
  removalWords,
  restartWords,
  whyNoClient,
  whyNotScalable
} from '../cardstate';
import { CommandIDs } from '../tokens';
import { ICluster } from '../types';
import { trans } from '../i18n';

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
 * A running (or starting, stopping) cluster's buttons; an ended (failed or
 * stopped) one's are History, Restart and Remove. What cannot work is
 * disabled and says why.
 */
export function CardActions(props: ICardActionsProps): React.ReactElement {
  const { cluster, commands, offline } = props;
  const stopping = cluster.status === 'stopping';
  const notScalable = whyNotScalable(cluster);
  const noClient = whyNoClient(cluster);
  const specLocked = offReason(
    cluster,
    'editable_spec',
    trans.__('Its Worker Spec cannot be edited')
  );

  // `live` actions need the server (the default): disabled while offline.
  const action = (
    id: string,
    text: string,
    label: string,
    options: {
      disabled?: boolean;
      why?: string | null;
      className?: string;
      live?: boolean;
    } = {}
  ) => {
    const offlineNow = options.live !== false && offline;
    const why = options.why ?? null;
    return (
      <Button
        minimal
        small
        className={`cm-CardAction ${options.className ?? ''}`}
        aria-label={label}
        title={
          offlineNow
            ? trans.__('Offline: waiting for the server')
            : (why ?? (commands.caption(id) || label))
        }
        disabled={options.disabled || why !== null || offlineNow}
        onClick={() => void commands.execute(id, { clusterId: cluster.id })}
      >
        {text}
      </Button>
    );
  };

  const removal = removalLabel(cluster);
  const remove = action(
    CommandIDs.shutdown,
    stopping ? trans.__('Stopping…') : removalWords(removal),
    trans.__('%1 %2', removalWords(removal), cluster.name),
    { disabled: stopping, className: 'jp-mod-warn cm-ShutdownButton' }
  );
  const history = (live: boolean) =>
    action(
      CommandIDs.showEvents,
      trans.__('History'),
      trans.__('Event history of %1', cluster.name),
      {
        className: 'cm-HistoryButton',
        live
      }
    );

  const logs = action(
    CommandIDs.showLogs,
    trans.__('Logs'),
    trans.__('Logs of %1', cluster.name),
    {
      className: 'cm-LogsButton'
    }
  );

  if (hasEnded(cluster)) {
    return (
      <div className="cm-ClusterCard-actions cm-mod-ended">
        {history(false)}
        {logs}
        {canRestart(cluster) &&
          action(
            CommandIDs.restart,
            restartWords(cluster),
            trans.__('%1 %2', restartWords(cluster), cluster.name),
            { className: 'jp-mod-accept cm-RestartButton' }
          )}
        {remove}
      </div>
    );
  }
  return (
    <div className="cm-ClusterCard-actions">
      {action(
        CommandIDs.openDashboard,
        trans.__('Dashboard'),
        trans.__('Open the dashboard of %1', cluster.name),
        {
          why: cluster.dashboard_url
            ? null
            : trans.__('The dashboard is not up yet'),
          className: 'cm-DashboardButton'
        }
      )}
      {
        <>
          {action(
            CommandIDs.scale,
            trans.__('Scale'),
            trans.__('Scale %1', cluster.name),
            {
              why: notScalable,
              className: 'cm-ScaleButton'
            }
          )}
          {action(
            CommandIDs.adapt,
            trans.__('Adaptive'),
            trans.__('Adaptive mode of %1', cluster.name),
            { why: notScalable, className: 'cm-AdaptButton' }
          )}
          {action(
            CommandIDs.editSpec,
            trans.__('Spec'),
            trans.__('Edit the Worker Spec of %1', cluster.name),
            {
              why: notScalable ?? (specLocked ? `Spec: ${specLocked}` : null),
              className: 'cm-SpecButton'
            }
          )}
        </>
      }
      {props.canInsert &&
        action(
          CommandIDs.insertClientCell,
          trans.__('Insert client'),
          trans.__('Insert client code for %1', cluster.name),
          { why: noClient, className: 'cm-InsertButton', live: false }
        )}
      {history(true)}
      {!props.compact && capabilitiesOf(cluster).can_stop && logs}
      {props.compact && (
        <Button
          minimal
          small
          className="cm-CardAction cm-MoreButton"
          aria-label={trans.__('More actions for %1', cluster.name)}
          aria-haspopup="menu"
          title={trans.__(
            'All actions (also: right-click the card, or Shift+F10)'
          )}
          onClick={openContextMenu}
        >
          {trans.__('More…')}
        </Button>
      )}
      {remove}
    </div>
  );
}
