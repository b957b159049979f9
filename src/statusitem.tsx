/**
 * The status-bar item: the clusters up and the workers they run, kept up to
 * date by the model's signals; a click shows the Clusters sidebar.
 */
import { TextItem } from '@jupyterlab/statusbar';
import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import * as React from 'react';

import { trans } from './i18n';
import { IClustersModel } from './tokens';
import { statusSummary } from './statussummary';

/**
 * The item's id in the status bar.
 */
export const STATUS_ITEM_ID = 'clustermgr-lab:status';

export class ClusterStatusItem extends ReactWidget {
  constructor(options: { model: IClustersModel; onClick: () => void }) {
    super();
    this._model = options.model;
    this._onClick = options.onClick;
    this.addClass('cm-StatusItem');
    this.node.title = trans.__('Dask clusters: click to show the sidebar');
  }

  protected render(): React.ReactElement {
    return (
      <UseSignal signal={this._model.changed}>
        {() => (
          <span
            role="button"
            tabIndex={0}
            className="cm-StatusItem-button"
            aria-label={trans.__('Dask clusters: %1', this.text)}
            onClick={this._onClick}
            onKeyDown={event => {
              if (event.key === 'Enter' || event.key === ' ') {
                event.preventDefault();
                this._onClick();
              }
            }}
          >
            <TextItem source={this.text} />
          </span>
        )}
      </UseSignal>
    );
  }

  /**
   * What the item says now.
   */
  get text(): string {
    return statusSummary(this._model.clusters);
  }

  private _model: IClustersModel;
  private _onClick: () => void;
}
