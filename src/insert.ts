/**
 * Where a Client cell goes: the current notebook (a new cell below the
 * active one), console (its prompt) or file editor (at the cursor).
 */
import type { ConsolePanel, IConsoleTracker } from '@jupyterlab/console';
import type { IDocumentWidget } from '@jupyterlab/docregistry';
import type { FileEditor, IEditorTracker } from '@jupyterlab/fileeditor';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Widget } from '@lumino/widgets';

import { clientCode, Connectable, insertClientCell } from './clientcell';

/**
 * The trackers of the places a Client cell can go (each may be missing).
 */
export interface IInsertTargets {
  notebooks: INotebookTracker | null;
  consoles: IConsoleTracker | null;
  editors: IEditorTracker | null;
}

export type Destination =
  | { kind: 'notebook'; widget: NotebookPanel }
  | { kind: 'console'; widget: ConsolePanel }
  | { kind: 'editor'; widget: IDocumentWidget<FileEditor> };

/**
 * The destination for `current` (the main area's current widget), else the
 * last notebook used.
 */
export function findDestination(
  current: Widget | null,
  targets: IInsertTargets
): Destination | null {
  const { notebooks, consoles, editors } = targets;
  if (current) {
    if (notebooks?.has(current)) {
      return { kind: 'notebook', widget: current as NotebookPanel };
    }
    if (consoles?.has(current)) {
      return { kind: 'console', widget: current as ConsolePanel };
    }
    if (editors?.has(current)) {
      return {
        kind: 'editor',
        widget: current as IDocumentWidget<FileEditor>
      };
    }
  }
  const notebook = notebooks?.currentWidget;
  return notebook ? { kind: 'notebook', widget: notebook } : null;
}

/**
 * Put the client code for `cluster` into a destination and focus it.
 */
export function insertClientCode(
  destination: Destination,
  cluster: Connectable
): void {
  const code = clientCode(cluster);
  switch (destination.kind) {
    case 'notebook':
      insertClientCell(destination.widget, cluster);
      break;
    case 'console': {
      const prompt = destination.widget.console.promptCell;
      if (prompt) {
        const source = prompt.model.sharedModel.getSource();
        prompt.model.sharedModel.setSource(
          source.trim() ? `${source}\n${code}` : code
        );
        prompt.editor?.focus();
      }
      break;
    }
    case 'editor': {
      const editor = destination.widget.content.editor;
      if (editor.replaceSelection) {
        editor.replaceSelection(`${code}\n`);
      } else {
        const shared = destination.widget.content.model.sharedModel;
        shared.setSource(`${shared.getSource()}${code}\n`);
      }
      editor.focus();
      break;
    }
  }
}
