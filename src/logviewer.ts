/**
 * A cluster's logs as a JupyterLab tab: which log (the scheduler's or a
 * worker's, with the worker's state), the last lines, follow mode (a
 * WebSocket of its own that pushes what is appended), search and download.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { Styling } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { API_PATH, asServerError, requestAPI } from './request';
import { ILogChunk, ILogEntry, ILogList, LogFollowMessage } from './types';
import { trans } from './i18n';

/**
 * How many lines a tab shows at most (older ones are dropped while following).
 */
export const MAX_LINES = 5000;

/**
 * The path of one log's REST route below the API.
 */
function logPath(clusterId: string, name: string): string {
  return `clusters/${encodeURIComponent(clusterId)}/logs/${encodeURIComponent(name)}`;
}

/**
 * The DOM id of a cluster's log tab.
 */
export function logTabId(clusterId: string): string {
  return `clustermgr-logs-${clusterId}`;
}

/**
 * The log viewer of one cluster.
 */
export class LogViewer extends Widget {
  constructor(options: LogViewer.IOptions) {
    super();
    this._settings = options.settings;
    this._clusterId = options.clusterId;
    this._name = options.name ?? 'scheduler';
    this.addClass('cm-LogViewer');
    const bar = document.createElement('div');
    bar.className = 'cm-LogViewer-toolbar';
    this._picker.className = 'cm-LogViewer-picker';
    this._picker.setAttribute('aria-label', trans.__('Which log'));
    this._picker.onchange = () => void this.showLog(this._picker.value);
    const follow = document.createElement('label');
    follow.className = 'cm-LogViewer-followLabel';
    this._follow.type = 'checkbox';
    this._follow.checked = true;
    this._follow.className = 'cm-LogViewer-follow';
    this._follow.onchange = () => void this.showLog(this._name);
    follow.append(this._follow, ` ${trans.__('Follow')}`);
    this._search.type = 'search';
    this._search.placeholder = trans.__('Search (only matching lines)');
    this._search.className = 'cm-LogViewer-search';
    this._search.setAttribute('aria-label', trans.__('Search the log'));
    this._search.oninput = () => this._render();
    const download = document.createElement('button');
    download.type = 'button';
    download.className = 'cm-LogViewer-download';
    download.textContent = trans.__('Download');
    download.title = trans.__('Save the last 100000 lines of this log');
    download.onclick = () => void this.download();
    const reload = document.createElement('button');
    reload.type = 'button';
    reload.className = 'cm-LogViewer-reload';
    reload.textContent = trans.__('Reload');
    reload.onclick = () => void this.showLog(this._name);
    bar.append(this._picker, follow, this._search, download, reload);
    // JupyterLab's own look for DOM-built controls: jp-mod-styled, and the select in its caret wrapper.
    Styling.styleNode(bar);
    this._status.className = 'cm-LogViewer-status';
    this._status.setAttribute('role', 'status');
    this._text.className = 'cm-LogViewer-text';
    this._text.tabIndex = 0;
    this.node.append(bar, this._status, this._text);
    void this.showLog(this._name);
  }

  /** The log shown. */
  get logName(): string {
    return this._name;
  }

  /**
   * Show log `name`: its last lines, then (in follow mode) what is appended.
   */
  async showLog(name: string): Promise<void> {
    this._close();
    this._name = name;
    this._lines = [];
    this._render();
    await this.refreshList();
    if (this._follow.checked) {
      this._open();
      return;
    }
    try {
      const chunk = await requestAPI<ILogChunk>(
        `${logPath(this._clusterId, name)}?tail=1000`,
        {},
        this._settings
      );
      this._append(chunk.text);
      this._setStatus(trans.__('%1 bytes; the last lines', chunk.size));
    } catch (error) {
      this._setStatus(asServerError(error).message);
    }
  }

  /**
   * Fetch the list of logs again (the picker shows each worker's state).
   */
  async refreshList(): Promise<void> {
    try {
      const data = await requestAPI<ILogList>(
        `clusters/${encodeURIComponent(this._clusterId)}/logs`,
        {},
        this._settings
      );
      this._entries = data.logs;
    } catch (error) {
      this._setStatus(asServerError(error).message);
    }
    const names = this._entries.map(e => e.name);
    if (!names.includes(this._name)) {
      names.unshift(this._name);
    }
    this._picker.replaceChildren(
      ...names.map(name => {
        const entry = this._entries.find(e => e.name === name);
        const option = document.createElement('option');
        option.value = name;
        option.textContent = entry
          ? `${name} (${entry.worker ? entry.state : 'scheduler'})`
          : name;
        return option;
      })
    );
    this._picker.value = this._name;
  }

  /**
   * Save the log's last lines as a file.
   */
  async download(): Promise<void> {
    const chunk = await requestAPI<ILogChunk>(
      `${logPath(this._clusterId, this._name)}?tail=100000`,
      {},
      this._settings
    );
    const link = document.createElement('a');
    link.href = URL.createObjectURL(
      new Blob([chunk.text], { type: 'text/plain' })
    );
    link.download = `${this._clusterId}-${this._name}.log`;
    link.click();
    URL.revokeObjectURL(link.href);
  }

  dispose(): void {
    this._close();
    super.dispose();
  }

  private _open(): void {
    let url = URLExt.join(
      this._settings.wsUrl,
      API_PATH,
      logPath(this._clusterId, this._name),
      'follow'
    );
    url += '?tail=1000';
    if (this._settings.token) {
      url += `&token=${encodeURIComponent(this._settings.token)}`;
    }
    const socket = new this._settings.WebSocket(url);
    this._socket = socket;
    this._setStatus('Following…');
    socket.onmessage = event => {
      const message = JSON.parse(event.data as string) as LogFollowMessage;
      if (message.type === 'tail' || message.type === 'append') {
        this._append(message.text);
        this._setStatus(`Following: ${message.size} bytes`);
      } else if (message.type === 'gone') {
        this._setStatus(
          trans.__('The cluster is gone; its logs went with it.')
        );
      } else if (message.type === 'error') {
        this._setStatus(
          message.message ?? trans.__('This log cannot be read.')
        );
      }
    };
    socket.onclose = () => {
      if (this._socket === socket) {
        this._socket = null;
        if (this._follow.checked) {
          this._setStatus(
            trans.__('%1 (stopped following)', this._status.textContent ?? '')
          );
        }
      }
    };
  }

  private _close(): void {
    if (this._socket) {
      const socket = this._socket;
      this._socket = null;
      socket.close();
    }
  }

  private _append(text: string): void {
    if (!text) {
      return;
    }
    const lines = text.split('\n');
    if (this._lines.length && this._partial) {
      this._lines[this._lines.length - 1] += lines.shift() ?? '';
    }
    this._partial = !text.endsWith('\n');
    if (!this._partial) {
      lines.pop();
    }
    this._lines.push(...lines);
    if (this._lines.length > MAX_LINES) {
      this._lines.splice(0, this._lines.length - MAX_LINES);
    }
    this._render();
  }

  private _render(): void {
    const query = this._search.value.toLowerCase();
    const lines = query
      ? this._lines.filter(line => line.toLowerCase().includes(query))
      : this._lines;
    const atBottom =
      this._text.scrollTop + this._text.clientHeight >=
      this._text.scrollHeight - 4;
    this._text.textContent = lines.join('\n');
    if (atBottom || this._follow.checked) {
      this._text.scrollTop = this._text.scrollHeight;
    }
  }

  private _setStatus(text: string): void {
    this._status.textContent = text;
  }

  private _settings: ServerConnection.ISettings;
  private _clusterId: string;
  private _name: string;
  private _entries: ILogEntry[] = [];
  private _lines: string[] = [];
  private _partial = false;
  private _socket: WebSocket | null = null;
  private _picker = document.createElement('select');
  private _follow = document.createElement('input');
  private _search = document.createElement('input');
  private _status = document.createElement('div');
  private _text = document.createElement('pre');
}

export namespace LogViewer {
  export interface IOptions {
    settings: ServerConnection.ISettings;
    clusterId: string;
    /** The log to show first (default: the scheduler's). */
    name?: string;
  }
}
