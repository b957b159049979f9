import * as nbformat from '@jupyterlab/nbformat';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { MimeData } from '@lumino/coreutils';
import { Drag } from '@lumino/dragdrop';

import { clientCode, type Connectable } from './clientcode';
import { ICluster } from './types';
import { trans } from './i18n';

export { clientCode } from './clientcode';
export type { Connectable } from './clientcode';

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
 * Whether a notebook cell holds nothing (only white space): the Client code
 * goes into it rather than into a new cell.
 */
export function isEmptyCell(cell: {
  model: { sharedModel: { getSource(): string } };
}): boolean {
  return cell.model.sharedModel.getSource().trim() === '';
}

/**
 * Put the client code into the active cell of a notebook when it is empty,
 * else into a new cell below it; activate and focus that cell.
 */
export function insertClientCell(
  panel: NotebookPanel,
  cluster: Connectable
): void {
  const notebook = panel.content;
  if (!notebook.model) {
    return;
  }
  const active = notebook.activeCell;
  if (!active || !isEmptyCell(active)) {
    NotebookActions.insertBelow(notebook);
  }
  fillActiveCell(panel, cluster);
}

/**
 * Put the client code into cell `index` of a notebook, which is empty (a
 * cluster dropped on it): that cell becomes the Client cell.
 */
export function fillEmptyCell(
  panel: NotebookPanel,
  index: number,
  cluster: Connectable
): void {
  const notebook = panel.content;
  notebook.deselectAll();
  notebook.activeCellIndex = index;
  fillActiveCell(panel, cluster);
}

function fillActiveCell(panel: NotebookPanel, cluster: Connectable): void {
  const notebook = panel.content;
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
  node.textContent = trans.__('Client for %1', cluster.name);
  return node;
}
