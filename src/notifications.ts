/**
 * Shows bad news about clusters as JupyterLab notifications (badnews.ts says
 * what is bad news): one per piece of news, none repeated within a minute,
 * each with a link to the cluster's History.
 */
import { Notification } from '@jupyterlab/apputils';
import { CommandRegistry } from '@lumino/commands';

import { badNews, goneNews, IBadNews } from './badnews';
import { ClustersModel } from './model';
import { CommandIDs } from './tokens';
import { ICluster } from './types';
import { trans } from './i18n';

/**
 * How long the same words are not shown again, in ms.
 */
const REPEAT_AFTER = 60000;

/**
 * Follows a model and notifies what went wrong.
 */
export class BadNewsNotifier {
  constructor(model: ClustersModel, commands: CommandRegistry) {
    this._model = model;
    this._commands = commands;
    model.changed.connect(this._onChange, this);
  }

  dispose(): void {
    this._model.changed.disconnect(this._onChange, this);
  }

  private _onChange(model: ClustersModel, change: ClustersModel.IChange): void {
    switch (change.type) {
      case 'added':
      case 'changed': {
        const cluster = change.id ? model.get(change.id) : undefined;
        if (cluster) {
          this._show(
            badNews(this._seen.get(cluster.id), cluster, change.events)
          );
          this._seen.set(cluster.id, cluster);
        }
        return;
      }
      case 'removed':
        if (change.id) {
          this._seen.delete(change.id); // announced by the server: not news
        }
        return;
      case 'snapshot':
      case 'refresh': {
        const now = new Map(model.clusters.map(c => [c.id, c]));
        const gone = Array.from(this._seen.values()).filter(
          c => !now.has(c.id)
        );
        const news = goneNews(gone);
        for (const cluster of now.values()) {
          const before = this._seen.get(cluster.id);
          if (before) {
            news.push(...badNews(before, cluster));
          }
        }
        this._seen = now;
        this._show(news);
        return;
      }
      default:
        return;
    }
  }

  private _show(news: IBadNews[]): void {
    const now = Date.now();
    for (const item of news) {
      const last = this._shown.get(item.message);
      if (last !== undefined && now - last < REPEAT_AFTER) {
        continue;
      }
      this._shown.set(item.message, now);
      const actions = this._model.get(item.clusterId)
        ? [
            {
              label: trans.__('History'),
              caption: trans.__('Open the cluster’s event history'),
              callback: () =>
                void this._commands.execute(CommandIDs.showEvents, {
                  clusterId: item.clusterId
                })
            }
          ]
        : [];
      Notification.emit(item.message, item.level, {
        autoClose: item.level === 'error' ? false : 15000,
        actions
      });
    }
    for (const [message, time] of this._shown) {
      if (now - time >= REPEAT_AFTER) {
        this._shown.delete(message);
      }
    }
  }

  private _model: ClustersModel;
  private _commands: CommandRegistry;
  private _seen = new Map<string, ICluster>();
  private _shown = new Map<string, number>();
}
