import {
  Button,
  collapseAllIcon,
  expandAllIcon,
  ReactWidget,
  UseSignal
} from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { startClusterDrag } from './clientcell';
import { COMPACT_ABOVE, shouldCompact } from './compact';
import { ClusterCard } from './components/ClusterCard';
import {
  ClusterFilter,
  MANY_CLUSTERS,
  matchesFilter
} from './components/ClusterFilter';
import { GoneNotice } from './components/GoneNotice';
import { GoneTracker } from './gone';
import { trans } from './i18n';
import { clusterIcon } from './icons';
import { ClustersModel } from './model';
import { CommandIDs } from './tokens';
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
    this._commands = options.commands;
    this._canInsert = options.canInsert;
    this.id = SIDEBAR_ID;
    this.addClass('cm-Sidebar');
    this.title.icon = clusterIcon;
    this.title.caption = trans.__('Clusters');
    this.title.label = trans.__('Clusters');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', trans.__('Clusters'));
    this.node.tabIndex = -1;
    this._gone = new GoneTracker(this._model);
    this._gone.changed.connect(() => this.update());
    // A card clicked, or reached with the keyboard, is the one commands run
    // from the palette, the main menu or a shortcut act on.
    this.node.addEventListener('click', event => {
      if (event.button === 0) {
        this._select(event.target);
      }
    });
    this.node.addEventListener('keyup', event => {
      if (['Tab', 'ArrowUp', 'ArrowDown', 'Home', 'End'].includes(event.key)) {
        this._select(document.activeElement);
      }
    });
  }

  get model(): ClustersModel {
    return this._model;
  }

  /**
   * The id of the selected cluster, while it is listed.
   */
  get selectedClusterId(): string | null {
    const id = this._selected;
    return id && this._model.get(id) ? id : null;
  }

  private _select(target: EventTarget | null): void {
    const card = (target as HTMLElement | null)?.closest?.<HTMLElement>(
      '.cm-ClusterCard'
    );
    const id = card?.dataset.clusterId ?? null;
    if (id && id !== this._selected) {
      this._selected = id;
      this.update();
    }
  }

  /**
   * Whether the user asked for compact cards (the `compactCards` setting).
   */
  get compactCards(): boolean {
    return this._compactCards;
  }

  /**
   * Show compact cards or full ones; `byUser` (the header's toggle) also
   * tells `onCompactCardsChanged`, which records it as the setting.
   */
  setCompactCards(on: boolean, byUser = false): void {
    if (on === this._compactCards) {
      return;
    }
    this._compactCards = on;
    this.update();
    if (byUser) {
      this.onCompactCardsChanged?.(on);
    }
  }

  /**
   * Called when the user toggles compact cards in the header.
   */
  onCompactCardsChanged: ((on: boolean) => void) | null = null;

  dispose(): void {
    this._gone.dispose();
    super.dispose();
  }

  /**
   * Activating the sidebar (e.g. "Show Clusters Sidebar") moves the focus
   * into it: the filter box, else the first card, else New Cluster.
   */
  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    const focusInside = () => {
      const target =
        this.node.querySelector<HTMLElement>('.cm-ClusterFilter-input input') ??
        this.node.querySelector<HTMLElement>('.cm-ClusterCard') ??
        this.node.querySelector<HTMLElement>('.cm-NewClusterButton:enabled');
      (target ?? this.node).focus();
    };
    focusInside();
    // A sidebar shown for the first time renders a frame later.
    requestAnimationFrame(() => {
      if (document.activeElement === this.node) {
        focusInside();
      }
    });
  }

  protected render(): React.ReactElement {
    return (
      <UseSignal signal={this._model.changed} initialArgs={{ type: 'refresh' }}>
        {() => (
          <ClusterPanel
            model={this._model}
            commands={this._commands}
            canInsert={this._canInsert}
            gone={this._gone}
            selected={this.selectedClusterId}
            compactCards={this._compactCards}
            onCompactCards={on => this.setCompactCards(on, true)}
            onDragStart={(cluster, x, y) =>
              startClusterDrag({
                cluster,
                clientX: x,
                clientY: y,
                source: this
              })
            }
          />
        )}
      </UseSignal>
    );
  }

  private _gone: GoneTracker;
  private _compactCards = false;
  private _selected: string | null = null;

  private _model: ClustersModel;
  private _commands: CommandRegistry;
  private _canInsert: boolean;
}

export namespace ClusterSidebar {
  export interface IOptions {
    model: ClustersModel;
    commands: CommandRegistry;
    /**
     * Whether cards offer "Insert client" (notebooks are available).
     */
    canInsert: boolean;
  }
}

/**
 * The message when the server extension does not answer.
 */
function ServerMissing(): React.ReactElement {
  return (
    <div className="cm-ServerMissing" role="alert">
      <p>
        {trans.__(
          'The %1 server extension is not enabled, so there are no clusters to show.',
          'clustermgr_lab'
        )}
      </p>
      <p>{trans.__('Run')}</p>
      <pre>jupyter server extension enable clustermgr_lab</pre>
      <p>{trans.__('and restart JupyterLab.')}</p>
    </div>
  );
}

interface IClusterPanelProps {
  model: ClustersModel;
  commands: CommandRegistry;
  canInsert: boolean;
  gone: GoneTracker;
  /** The id of the selected cluster. */
  selected: string | null;
  /** Whether the user asked for compact cards. */
  compactCards: boolean;
  onCompactCards: (on: boolean) => void;
  onDragStart: (cluster: ICluster, clientX: number, clientY: number) => void;
}

/**
 * How long the stream may be down, before it was ever up, without being
 * said to be offline.
 */
export const OFFLINE_GRACE = 2000;

/**
 * Whether to say the stream is offline: it is down, and either it was up
 * before (a connection lost) or it has been down `OFFLINE_GRACE` ms.
 */
function useSaidOffline(connected: boolean): boolean {
  const wasUp = React.useRef(false);
  const [late, setLate] = React.useState(false);
  if (connected) {
    wasUp.current = true;
  }
  React.useEffect(() => {
    if (connected) {
      setLate(false);
      return;
    }
    const timer = setTimeout(() => setLate(true), OFFLINE_GRACE);
    return () => clearTimeout(timer);
  }, [connected]);
  return !connected && (wasUp.current || late);
}

/**
 * Why New Cluster and Attach wait while the server is out of reach.
 */
const offlineReason = () =>
  trans.__('The server is out of reach: wait until it is Live again');

/**
 * Header (live state, New Cluster), what happened to clusters that went
 * unannounced, a filter box when there are many clusters, then the cards
 * (compact when the user asks, or above `COMPACT_ABOVE` clusters).
 */
function ClusterPanel(props: IClusterPanelProps): React.ReactElement {
  const { model, commands } = props;
  const missing = model.serverState === 'missing';
  const all = model.clusters;
  const many = all.length > MANY_CLUSTERS;
  const [filter, setFilter] = React.useState('');
  const clusters = many ? all.filter(c => matchesFilter(c, filter)) : all;
  const compact = shouldCompact(all.length, props.compactCards);
  const offline =
    !missing && model.serverState !== 'unknown' && !model.connected;
  // Said only once the stream has been down a while, or was lost after it
  // was up: no "Offline" flash while the page connects.
  const saidOffline = useSaidOffline(model.connected) && !missing;
  const stateText = missing
    ? trans.__('Server extension missing')
    : model.connected
      ? trans.__('Live')
      : saidOffline
        ? trans.__('Disconnected, reconnecting…')
        : trans.__('Connecting…');

  return (
    <div className="cm-ClusterPanel">
      <div className="cm-ClusterPanel-header">
        <h2 className="cm-ClusterPanel-title">{trans.__('Clusters')}</h2>
        <span
          className="cm-ConnectionState"
          data-connected={model.connected ? 'true' : 'false'}
          role="status"
          aria-label={trans.__('Live updates: %1', stateText)}
          title={stateText}
        >
          <span className="cm-ConnectionState-dot" />
          <span className="cm-ConnectionState-text">
            {model.connected
              ? trans.__('Live')
              : saidOffline
                ? trans.__('Offline')
                : trans.__('Connecting…')}
          </span>
        </span>
        <Button
          type="button"
          className="jp-mod-styled jp-mod-accept cm-NewClusterButton"
          aria-label={trans.__('New Cluster')}
          title={
            offline ? offlineReason() : commands.caption(CommandIDs.newCluster)
          }
          disabled={missing || offline}
          onClick={() => void commands.execute(CommandIDs.newCluster)}
        >
          {trans.__('New Cluster')}
        </Button>
        <Button
          type="button"
          className="jp-mod-styled cm-AttachButton"
          aria-label={trans.__('Attach a cluster started elsewhere')}
          title={
            offline
              ? offlineReason()
              : commands.caption(CommandIDs.attachCluster)
          }
          disabled={missing || offline}
          onClick={() => void commands.execute(CommandIDs.attachCluster)}
        >
          {trans.__('Attach')}
        </Button>
        <Button
          type="button"
          minimal
          small
          className="cm-CompactToggle"
          aria-pressed={props.compactCards}
          aria-label={trans.__('Compact cards')}
          title={
            props.compactCards
              ? trans.__(
                  'Compact cards: on (click for full cards; above %1 clusters they stay compact)',
                  COMPACT_ABOVE
                )
              : trans.__(
                  'Compact cards: off (click for compact cards; above %1 clusters they are compact anyway)',
                  COMPACT_ABOVE
                )
          }
          onClick={() => props.onCompactCards(!props.compactCards)}
        >
          {props.compactCards ? (
            <expandAllIcon.react tag="span" />
          ) : (
            <collapseAllIcon.react tag="span" />
          )}
        </Button>
      </div>
      {missing && <ServerMissing />}
      {offline && saidOffline && (
        <div className="cm-ClusterPanel-offline" role="status">
          {trans.__('Live updates are disconnected; reconnecting…')}
          {model.lastError ? ` (${model.lastError.message})` : ''}
        </div>
      )}
      {model.storeError && (
        <div className="cm-ClusterPanel-storeError" role="alert">
          {trans.__(
            'Clusters cannot be recorded: %1. New clusters and changes are refused until the server can write its store again; running clusters go on.',
            model.storeError
          )}
        </div>
      )}
      {props.gone.report && (
        <GoneNotice
          report={props.gone.report}
          onDismiss={() => props.gone.dismiss()}
        />
      )}
      {!missing && many && (
        <ClusterFilter
          value={filter}
          onChange={setFilter}
          shown={clusters.length}
          total={all.length}
        />
      )}
      {!missing &&
        (all.length === 0 ? (
          <p className="cm-ClusterPanel-empty">
            {model.loaded
              ? trans.__('No clusters. Start one with New Cluster.')
              : trans.__('Loading clusters…')}
          </p>
        ) : (
          <ul
            className={`cm-ClusterList${compact ? ' cm-mod-compact' : ''}`}
            aria-label={trans.__('Cluster list')}
          >
            {clusters.map(cluster => (
              <ClusterCard
                key={cluster.id}
                cluster={cluster}
                history={model.history(cluster.id)}
                commands={commands}
                canInsert={props.canInsert}
                offline={offline}
                compact={compact}
                selected={cluster.id === props.selected}
                onDragStart={props.onDragStart}
              />
            ))}
          </ul>
        ))}
      {all.length > 0 && (
        <p className="cm-ClusterPanel-hint">
          {trans.__(
            'Drag a cluster into a notebook, or use its context menu, to insert a Client cell (also into a console or a file).'
          )}
        </p>
      )}
    </div>
  );
}
