/**
 * Dropping a dragged cluster on a console or a file editor (notebooks take
 * the dropped cell themselves): the Client code goes into the console's
 * prompt, or at the file's cursor.
 */
import { Drag } from '@lumino/dragdrop';

import { CLUSTER_ID_MIME } from './clientcell';
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

  const onDragEvent = (event: Event) => {
    const drag = event as Drag.Event;
    if (!drag.mimeData?.hasData(CLUSTER_ID_MIME)) {
      return;
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
