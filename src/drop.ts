/**
 * Dropping a dragged cluster on a console or a file editor: the Client code
 * goes into the console's prompt, or at the file's cursor. Onto an empty
 * notebook cell, the code goes into that cell; elsewhere in a notebook, the
 * notebook takes the dropped cell itself (a new cell where it is dropped).
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import { Drag } from '@lumino/dragdrop';

import { CLUSTER_ID_MIME, fillEmptyCell, isEmptyCell } from './clientcell';
import { Destination, IInsertTargets, insertClientCode } from './insert';
import { ClustersModel } from './model';

const DRAG_EVENTS = ['lm-dragenter', 'lm-dragover', 'lm-drop'];

/**
 * Accept cluster drops on consoles and file editors, until disposed.
 */
export function acceptClusterDrops(options: {
  model: ClustersModel;
  targets: IInsertTargets;
  activate: (id: string) => void;
}): () => void {
  const { model, targets } = options;

  const destinationAt = (target: EventTarget | null): Destination | null => {
    const node = target as Node | null;
    if (!node) {
      return null;
    }
    const console = targets.consoles?.find(w => w.node.contains(node));
    if (console) {
      return { kind: 'console', widget: console };
    }
    const editor = targets.editors?.find(w => w.node.contains(node));
    return editor ? { kind: 'editor', widget: editor } : null;
  };

  /**
   * The notebook and index of the empty cell at `target`, if any.
   */
  const emptyCellAt = (
    target: EventTarget | null
  ): { panel: NotebookPanel; index: number } | null => {
    const node = target as Node | null;
    const panel = node && targets.notebooks?.find(w => w.node.contains(node));
    if (!panel) {
      return null;
    }
    const index = panel.content.widgets.findIndex(cell =>
      cell.node.contains(node)
    );
    const cell = panel.content.widgets[index];
    return cell && isEmptyCell(cell) ? { panel, index } : null;
  };

  const onDragEvent = (event: Event) => {
    const drag = event as Drag.Event;
    if (!drag.mimeData?.hasData(CLUSTER_ID_MIME)) {
      return;
    }
    if (event.type === 'lm-drop') {
      const empty = emptyCellAt(event.target);
      const cluster = model.get(
        drag.mimeData.getData(CLUSTER_ID_MIME) as string
      );
      if (empty && cluster?.scheduler_address) {
        event.preventDefault();
        event.stopPropagation();
        drag.dropAction = 'copy';
        // The notebook marked the cell it would have dropped before.
        empty.panel.node
          .querySelectorAll('.jp-mod-dropTarget')
          .forEach(node => node.classList.remove('jp-mod-dropTarget'));
        options.activate(empty.panel.id);
        fillEmptyCell(empty.panel, empty.index, cluster);
        return;
      }
    }
    const destination = destinationAt(event.target);
    if (!destination) {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    if (event.type === 'lm-dragenter') {
      return;
    }
    drag.dropAction = 'copy';
    if (event.type === 'lm-drop') {
      const cluster = model.get(
        drag.mimeData.getData(CLUSTER_ID_MIME) as string
      );
      if (cluster?.scheduler_address) {
        options.activate(destination.widget.id);
        insertClientCode(destination, cluster);
      }
    }
  };

  // Capture: the editors' own handlers never see a cluster drag.
  DRAG_EVENTS.forEach(type =>
    document.addEventListener(type, onDragEvent, true)
  );
  return () =>
    DRAG_EVENTS.forEach(type =>
      document.removeEventListener(type, onDragEvent, true)
    );
}
