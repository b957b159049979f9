import { Button, ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { eventChange, groupMemory, isWarning, repeatText } from '../events';
import { formatTime } from '../format';
import { ClustersModel } from '../model';
import { asServerError, requestAPI } from '../request';
import { IEvent, IEventList } from '../types';
import { trans } from '../i18n';

/**
 * The event history of one cluster (`GET clusters/{id}/events`): every
 * lifecycle change and scaling decision with its reason, newest first.
 * It reloads when the cluster changes.
 */
export class EventHistory extends ReactWidget {
  constructor(options: {
    model: ClustersModel;
    clusterId: string;
    /** The cluster's name (kept for the layout restorer). */
    clusterName: string;
  }) {
    super();
    this._model = options.model;
    this._clusterId = options.clusterId;
    this.clusterName = options.clusterName;
    this.addClass('cm-EventHistory');
    this._model.changed.connect(this._onChange, this);
    void this.load();
  }

  /**
   * The cluster whose history this is.
   */
  get clusterId(): string {
    return this._clusterId;
  }

  /**
   * The cluster's name when the tab was opened (it titles a restored tab).
   */
  readonly clusterName: string;

  /**
   * Fetch the events again.
   */
  async load(): Promise<void> {
    if (this._loading) {
      this._again = true;
      return;
    }
    this._loading = true;
    try {
      const data = await requestAPI<IEventList>(
        `clusters/${encodeURIComponent(this._clusterId)}/events`,
        {},
        this._model.serverSettings
      );
      this._events = data?.events ?? [];
      this._error = null;
    } catch (error) {
      const serverError = asServerError(error);
      // Gone: what was read before stays; "went with it" only when there
      // is nothing to show.
      this._error =
        serverError.status !== 404
          ? serverError.message
          : this._events?.length
            ? trans.__(
                'This cluster is gone; below is its history until it went.'
              )
            : trans.__('This cluster is gone; its history went with it.');
    } finally {
      this._loading = false;
    }
    this.update();
    if (this._again) {
      this._again = false;
      void this.load();
    }
  }

  dispose(): void {
    this._model.changed.disconnect(this._onChange, this);
    super.dispose();
  }

  protected render(): React.ReactElement {
    const cluster = this._model.get(this._clusterId);
    const events = [...(this._events ?? [])].reverse();
    return (
      <div className="cm-EventHistory-body">
        <div className="cm-EventHistory-header">
          <h2>
            {trans.__('Event history of %1', cluster?.name ?? this.clusterName)}
          </h2>
          <Button
            type="button"
            className="jp-mod-styled cm-EventHistory-refresh"
            onClick={() => void this.load()}
          >
            {trans.__('Refresh')}
          </Button>
        </div>
        {this._error && (
          <p className="cm-EventHistory-error" role="status">
            {this._error}
          </p>
        )}
        {this._events === null && !this._error && <p>{trans.__('Loading…')}</p>}
        {this._events !== null && (
          <table className="cm-EventHistory-table">
            <thead>
              <tr>
                <th scope="col">{trans.__('Time')}</th>
                <th scope="col">{trans.__('Kind')}</th>
                <th scope="col">{trans.__('Group')}</th>
                <th scope="col">{trans.__('Asked → workers')}</th>
                <th scope="col">{trans.__('What and why')}</th>
                <th scope="col">{trans.__('By')}</th>
              </tr>
            </thead>
            <tbody>
              {events.map((e, i) => (
                <tr
                  key={`${e.time}-${i}`}
                  data-kind={e.kind}
                  data-level={isWarning(e) ? 'warning' : 'info'}
                >
                  <td className="cm-EventHistory-time" title={e.time}>
                    {formatTime(e.time)}
                  </td>
                  <td className="cm-EventHistory-kind">{e.kind}</td>
                  <td data-label="group">{e.group ?? ''}</td>
                  <td data-label="workers">
                    {eventChange(
                      e,
                      cluster ? groupMemory(cluster, e.group) : null
                    )}
                  </td>
                  <td className="cm-EventHistory-message">
                    {e.cause && (
                      <span
                        className="cm-EventHistory-cause"
                        data-cause-kind={e.cause.kind}
                      >
                        {e.cause.kind}
                      </span>
                    )}{' '}
                    {e.message}
                    {repeatText(e) && (
                      <span className="cm-EventHistory-count">
                        {repeatText(e)}
                      </span>
                    )}
                  </td>
                  <td data-label="by">{e.source ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    );
  }

  private _onChange(_: ClustersModel, change: ClustersModel.IChange): void {
    if (change.id === this._clusterId || change.type === 'snapshot') {
      void this.load();
    }
  }

  private _model: ClustersModel;
  private _clusterId: string;
  private _events: IEvent[] | null = null;
  private _error: string | null = null;
  private _loading = false;
  private _again = false;
}
