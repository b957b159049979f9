/**
 * Clusters that left the list without the stream saying so: noticed when a
 * fresh snapshot (after a reconnection) or a GET no longer has them.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { onlyObserved } from './capabilities';
import { ClustersModel } from './model';

/**
 * Which clusters went, and whether the connection was down meanwhile.
 */
export interface IGoneReport {
  /** Clusters this server ran: gone with their workers. */
  names: string[];
  /** Clusters started elsewhere (attached, discovered): they may still run there. */
  observed: string[];
  afterOutage: boolean;
}

/**
 * Follows a model and reports the clusters that vanished unannounced.
 */
export class GoneTracker {
  constructor(model: ClustersModel) {
    this._model = model;
    model.changed.connect(this._onChange, this);
  }

  /**
   * The latest report, until dismissed.
   */
  get report(): IGoneReport | null {
    return this._report;
  }

  /**
   * Emitted when the report changes.
   */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  dismiss(): void {
    this._report = null;
    this._changed.emit();
  }

  dispose(): void {
    this._model.changed.disconnect(this._onChange, this);
  }

  private _onChange(model: ClustersModel, change: ClustersModel.IChange): void {
    switch (change.type) {
      case 'connection':
        if (!model.connected && this._known.size > 0) {
          this._outage = true;
        }
        return;
      case 'snapshot':
      case 'refresh': {
        const gone = Array.from(this._known.entries()).filter(
          ([id]) => !model.get(id)
        );
        const names = gone
          .filter(([, c]) => !c.observed)
          .map(([, c]) => c.name);
        const observed = gone
          .filter(([, c]) => c.observed)
          .map(([, c]) => c.name);
        if (gone.length > 0) {
          this._report = { names, observed, afterOutage: this._outage };
          this._changed.emit();
        }
        if (change.type === 'snapshot') {
          this._outage = false;
        }
        this._remember(model);
        return;
      }
      case 'added':
      case 'changed':
      case 'removed':
        this._remember(model);
        return;
      default:
        return;
    }
  }

  private _remember(model: ClustersModel): void {
    this._known = new Map(
      model.clusters.map(c => [
        c.id,
        { name: c.name, observed: onlyObserved(c) }
      ])
    );
  }

  private _model: ClustersModel;
  private _known = new Map<string, { name: string; observed: boolean }>();
  private _outage = false;
  private _report: IGoneReport | null = null;
  private _changed = new Signal<this, void>(this);
}
