import * as nbformat from '@jupyterlab/nbformat';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { MimeData } from '@lumino/coreutils';
import { Drag } from '@lumino/dragdrop';

import { ICluster } from './types';

/**
 * The MIME type JupyterLab notebooks accept on drop: a list of nbformat cells.
 * A notebook inserts them where they are dropped.
 */
export const JUPYTER_CELLS_MIME = 'application/vnd.jupyter.cells';

/**
 * Our own MIME type, carrying the cluster id (for drop targets that want it).
 */
export const CLUSTER_ID_MIME = 'application/vnd.clustermgr.cluster-id';

/**
 * Pixels the pointer must move before a press on a card becomes a drag.
 */
export const DRAG_THRESHOLD = 5;

/**
 * What the client code needs to know of a cluster.
 */
export type Connectable = Pick<ICluster, 'id' | 'scheduler_address' | 'tls'>;

/**
 * The lines that close the notebook's previous client (the one an earlier
 * Client cell bound to `client`), so that inserting again replaces it rather
 * than leaving one more client connected.
 */
const CLOSE_PREVIOUS = [
  'if isinstance(globals().get("client"), Client):',
  '    client.close()  # the client of a cell inserted before'
];

/**
 * The code that connects a client to a cluster's scheduler, closing the
 * client a previously inserted cell made.
 *
 * A cluster with TLS is reached through `clustermgr_lab.connect(id)`, which
 * asks this server for the cluster and builds its `distributed.Security`
 * from the certificate files (readable by this user only): no manual step.
 * A plain one (started elsewhere, or TLS turned off) by its address.
 */
export function clientCode(cluster: Connectable): string {
  if (cluster.tls) {
    return [
      'import clustermgr_lab',
      'from distributed import Client',
      ...CLOSE_PREVIOUS,
      `client = clustermgr_lab.connect(${JSON.stringify(cluster.id)})`
    ].join('\n');
  }
  return [
    'from distributed import Client',
    ...CLOSE_PREVIOUS,
    `client = Client(${JSON.stringify(cluster.scheduler_address)})`
  ].join('\n');
}

/**
 * The notebook cell holding the client code.
 */
export function clientCell(cluster: Connectable): nbformat.ICodeCell {
  return {
    cell_type: 'code',
    source: clientCode(cluster),
    metadata: {},
    outputs: [],
    execution_count: null
  };
}

/**
 * Insert a client cell below the active cell of a notebook and activate it.
 */
export function insertClientCell(
  panel: NotebookPanel,
  cluster: Connectable
): void {
  const notebook = panel.content;
  if (!notebook.model) {
    return;
  }
  NotebookActions.insertBelow(notebook);
  if (notebook.activeCell?.model.type !== 'code') {
    NotebookActions.changeCellType(notebook, 'code');
  }
  const cell = notebook.activeCell;
  if (cell) {
    cell.model.sharedModel.setSource(clientCode(cluster));
  }
  void NotebookActions.focusActiveCell(notebook);
}

/**
 * Start dragging a cluster. Dropping on a notebook inserts a client cell
 * (handled by the notebook itself); text fields get the code as plain text.
 */
export function startClusterDrag(options: {
  cluster: ICluster;
  clientX: number;
  clientY: number;
  source?: unknown;
}): Drag | null {
  const { cluster, clientX, clientY } = options;
  if (!cluster.scheduler_address) {
    return null;
  }
  const mimeData = new MimeData();
  mimeData.setData(JUPYTER_CELLS_MIME, [clientCell(cluster)]);
  mimeData.setData('text/plain', clientCode(cluster));
  mimeData.setData(CLUSTER_ID_MIME, cluster.id);

  const drag = new Drag({
    mimeData,
    dragImage: createDragImage(cluster),
    proposedAction: 'copy',
    supportedActions: 'copy',
    source: options.source ?? null
  });
  void drag.start(clientX, clientY).then(() => drag.dispose());
  return drag;
}

function createDragImage(cluster: ICluster): HTMLElement {
  const node = document.createElement('div');
  node.className = 'cm-DragImage';
  node.textContent = `Client for ${cluster.name}`;
  return node;
}
