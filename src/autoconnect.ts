import { ISessionContext } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';

import { clientCode } from './clientcell';
import { ClustersModel } from './model';
import { ICluster } from './types';

/**
 * Connects the kernels of notebooks to a chosen cluster by themselves: on a
 * new kernel and after every restart, while that cluster exists (by name),
 * it silently runs the client code (`clientCode`) in Python kernels. When
 * the cluster is gone, nothing is run any more.
 */
export class AutoConnector implements IDisposable {
  constructor(options: { model: ClustersModel; notebooks: INotebookTracker }) {
    this._model = options.model;
    options.notebooks.widgetAdded.connect(this._onNotebook, this);
    options.notebooks.forEach(panel => this._onNotebook(null, panel));
    this._notebooks = options.notebooks;
  }

  /**
   * The name of the cluster new kernels connect to; empty for none.
   */
  get clusterName(): string {
    return this._clusterName;
  }
  set clusterName(name: string) {
    this._clusterName = name.trim();
  }

  /**
   * The cluster new kernels connect to now, if it exists and runs.
   */
  get cluster(): ICluster | undefined {
    if (!this._clusterName) {
      return undefined;
    }
    return this._model.clusters.find(
      c =>
        c.name === this._clusterName &&
        !!c.scheduler_address &&
        c.status !== 'stopping' &&
        c.status !== 'stopped' &&
        c.status !== 'failed'
    );
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._notebooks.widgetAdded.disconnect(this._onNotebook, this);
  }

  private _onNotebook(_: unknown, panel: NotebookPanel): void {
    const context = panel.sessionContext;
    // Kernels waiting for their first "idle" (new or restarted), and kernels
    // already handled since they last (re)started.
    const waiting = new WeakSet<Kernel.IKernelConnection>();
    const handled = new WeakSet<Kernel.IKernelConnection>();
    const handle = (kernel: Kernel.IKernelConnection) => {
      waiting.delete(kernel);
      if (!handled.has(kernel)) {
        handled.add(kernel);
        void this._connect(kernel);
      }
    };
    const onStatus = (ctx: ISessionContext, status: Kernel.Status) => {
      const kernel = ctx.session?.kernel;
      if (!kernel || this._isDisposed) {
        return;
      }
      if (status === 'restarting' || status === 'autorestarting') {
        handled.delete(kernel);
        waiting.add(kernel);
      } else if (status === 'starting') {
        waiting.add(kernel);
      } else if (status === 'idle' && waiting.has(kernel)) {
        handle(kernel);
      }
    };
    const onKernel = (ctx: ISessionContext) => {
      const kernel = ctx.session?.kernel;
      if (!kernel || this._isDisposed) {
        return;
      }
      if (kernel.status === 'idle') {
        handle(kernel);
      } else {
        waiting.add(kernel);
      }
    };
    context.statusChanged.connect(onStatus);
    context.kernelChanged.connect(onKernel);
    void context.ready.then(() => {
      if (!context.isDisposed) {
        onKernel(context);
      }
    });
    panel.disposed.connect(() => {
      context.statusChanged.disconnect(onStatus);
      context.kernelChanged.disconnect(onKernel);
    });
  }

  private async _connect(kernel: Kernel.IKernelConnection): Promise<void> {
    if (!this.cluster) {
      return;
    }
    const info = await kernel.info;
    // The cluster may have gone while the kernel answered.
    const cluster = this.cluster;
    if (
      !cluster?.scheduler_address ||
      kernel.isDisposed ||
      info.language_info.name !== 'python'
    ) {
      return;
    }
    kernel.requestExecute(
      { code: clientCode(cluster), silent: true, store_history: false },
      true
    );
  }

  private _model: ClustersModel;
  private _notebooks: INotebookTracker;
  private _clusterName = '';
  private _isDisposed = false;
}
