/**
 * Commands that change a cluster: scale, adaptive mode, Worker Spec, restart
 * (a failed or stopped one), and shut down (or detach, for a cluster this
 * server cannot stop; remove, for one that has ended).
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { capabilitiesOf, offReason } from './capabilities';
import {
  canRestart,
  hasEnded,
  removalLabel,
  removalWords,
  restartWords
} from './cardstate';
import { canScale, ClusterTest, ICommandContext } from './commandcontext';
import {
  showAdaptiveDialog,
  showIdleTimeoutDialog,
  showRenameDialog,
  showScaleDialog,
  showSpecDialog
} from './dialogs';
import { trans } from './i18n';
import { tryRequest } from './notify';
import { CommandIDs } from './tokens';

export function addClusterCommands(context: ICommandContext): void {
  const { app, model, target, applies, pick, scalable } = context;
  const { commands } = app;

  commands.addCommand(CommandIDs.scale, {
    label: trans.__('Scale…'),
    caption: trans.__('Scale a group in workers, cores or memory'),
    isEnabled: scalable,
    execute: async args => {
      const cluster = await pick(args, canScale);
      return cluster ? showScaleDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.adapt, {
    label: trans.__('Adaptive Mode…'),
    caption: trans.__(
      'Turn adaptive mode on or off and set its range, per group'
    ),
    isEnabled: scalable,
    execute: async args => {
      const cluster = await pick(args, canScale);
      return cluster ? showAdaptiveDialog(model, cluster) : null;
    }
  });

  const specEditable: ClusterTest = cluster =>
    canScale(cluster) && capabilitiesOf(cluster).editable_spec !== false;
  commands.addCommand(CommandIDs.editSpec, {
    label: trans.__('Edit Worker Spec…'),
    caption: args =>
      offReason(target(args), 'editable_spec', '') ||
      trans.__('Change the worker groups: count, threads, memory, GPUs'),
    isEnabled: args => applies(args, specEditable),
    execute: async args => {
      const cluster = await pick(args, specEditable);
      return cluster ? showSpecDialog(model, cluster) : null;
    }
  });

  // Renaming and the idle timeout need a live cluster (the server refuses
  // them otherwise); the dialog shows what it refuses.
  const live: ClusterTest = cluster =>
    !hasEnded(cluster) && cluster.status !== 'stopping';
  const isLive = (args: ReadonlyPartialJSONObject) => applies(args, live);

  commands.addCommand(CommandIDs.rename, {
    label: trans.__('Rename…'),
    caption: trans.__('Give the cluster another name'),
    isEnabled: isLive,
    execute: async args => {
      const cluster = await pick(args, live);
      return cluster ? showRenameDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.idleTimeout, {
    label: trans.__('Idle Timeout…'),
    caption: trans.__(
      'Shut the cluster down after this long with no tasks and no client'
    ),
    isEnabled: isLive,
    execute: async args => {
      const cluster = await pick(args, live);
      return cluster ? showIdleTimeoutDialog(model, cluster) : null;
    }
  });

  const restartable: ClusterTest = cluster => canRestart(cluster);
  commands.addCommand(CommandIDs.restart, {
    label: args => {
      const cluster = target(args);
      return trans.__(
        '%1…',
        cluster ? restartWords(cluster) : trans.__('Restart')
      );
    },
    caption: trans.__(
      'Start the cluster again: same name, Worker Spec and options'
    ),
    isEnabled: args => applies(args, restartable),
    isVisible: args => {
      const cluster = target(args);
      return !cluster || canRestart(cluster);
    },
    execute: async args => {
      const cluster = await pick(args, restartable);
      if (!cluster) {
        return;
      }
      await tryRequest(
        trans.__(
          'Could not %1 %2',
          restartWords(cluster).toLowerCase(),
          cluster.name
        ),
        () => model.restartCluster(cluster.id)
      );
    }
  });

  // A stopped (idle) cluster is removed; one that is stopping is left alone.
  const removable: ClusterTest = cluster => cluster.status !== 'stopping';
  commands.addCommand(CommandIDs.shutdown, {
    label: args => {
      const cluster = target(args);
      const action = cluster ? removalLabel(cluster) : 'Shut down';
      return action === 'Shut down'
        ? trans.__('Shut Down…')
        : trans.__('%1…', removalWords(action));
    },
    caption: args => {
      const cluster = target(args);
      if (cluster && hasEnded(cluster)) {
        return trans.__('Take the cluster off the list, with its history');
      }
      return cluster && !capabilitiesOf(cluster).can_stop
        ? trans.__(
            'Take the cluster off the list; it keeps running where it was started'
          )
        : trans.__('Stop the scheduler and all workers of the cluster');
    },
    isEnabled: args => applies(args, removable),
    execute: async args => {
      const cluster = await pick(args, removable);
      if (!cluster) {
        return;
      }
      const action = removalLabel(cluster);
      const words = removalWords(action);
      const body = {
        Remove: trans.__('It leaves this list, with its history.'),
        Detach: trans.__(
          'It leaves this list; its scheduler and workers keep running where they were started.'
        ),
        'Shut down': trans._n(
          'Its scheduler and %1 worker stop, and clients connected to it lose their data.',
          'Its scheduler and %1 workers stop, and clients connected to it lose their data.',
          cluster.workers.requested
        )
      }[action];
      const result = await showDialog({
        title: trans.__('%1 %2?', words, cluster.name),
        body,
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: words })
        ],
        // Enter keeps the cluster: destroying it takes a deliberate click.
        defaultButton: 0
      });
      if (result.button.accept) {
        await tryRequest(
          trans.__('Could not %1 %2', words.toLowerCase(), cluster.name),
          () => model.shutdownCluster(cluster.id)
        );
      }
    }
  });
}
