/**
 * Commands that change a cluster: scale, adaptive mode, Worker Spec, restart
 * (a failed or stopped one), and shut down (or detach, for a cluster this
 * server cannot stop; remove, for one that has ended).
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { capabilitiesOf, offReason } from './capabilities';
import { canRestart, hasEnded, removalLabel, restartLabel } from './cardstate';
import { ICommandContext } from './commandcontext';
import {
  showAdaptiveDialog,
  showIdleTimeoutDialog,
  showRenameDialog,
  showScaleDialog,
  showSpecDialog
} from './dialogs';
import { plural } from './format';
import { tryRequest } from './notify';
import { CommandIDs } from './tokens';

export function addClusterCommands(context: ICommandContext): void {
  const { app, model, target, scalable } = context;
  const { commands } = app;

  commands.addCommand(CommandIDs.scale, {
    label: 'Scale…',
    caption: 'Scale a group in workers, cores or memory',
    isEnabled: scalable,
    execute: args => {
      const cluster = target(args);
      return cluster ? showScaleDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.adapt, {
    label: 'Adaptive Mode…',
    caption: 'Turn adaptive mode on or off and set its range, per group',
    isEnabled: scalable,
    execute: args => {
      const cluster = target(args);
      return cluster ? showAdaptiveDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.editSpec, {
    label: 'Edit Worker Spec…',
    caption: args =>
      offReason(target(args), 'editable_spec', '') ||
      'Change the worker groups: count, threads, memory, GPUs',
    isEnabled: args =>
      scalable(args) && capabilitiesOf(target(args)).editable_spec !== false,
    execute: args => {
      const cluster = target(args);
      return cluster ? showSpecDialog(model, cluster) : null;
    }
  });

  // Renaming and the idle timeout need a live cluster (the server refuses
  // them otherwise); the dialog shows what it refuses.
  const live = (args: ReadonlyPartialJSONObject) => {
    const cluster = target(args);
    return !!cluster && !hasEnded(cluster) && cluster.status !== 'stopping';
  };

  commands.addCommand(CommandIDs.rename, {
    label: 'Rename…',
    caption: 'Give the cluster another name',
    isEnabled: live,
    execute: args => {
      const cluster = target(args);
      return cluster ? showRenameDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.idleTimeout, {
    label: 'Idle Timeout…',
    caption:
      'Shut the cluster down after this long with no tasks and no client',
    isEnabled: live,
    execute: args => {
      const cluster = target(args);
      return cluster ? showIdleTimeoutDialog(model, cluster) : null;
    }
  });

  commands.addCommand(CommandIDs.restart, {
    label: args => {
      const cluster = target(args);
      return `${cluster ? restartLabel(cluster) : 'Restart'}…`;
    },
    caption: 'Start the cluster again: same name, Worker Spec and options',
    isEnabled: args => {
      const cluster = target(args);
      return !!cluster && canRestart(cluster);
    },
    isVisible: args => {
      const cluster = target(args);
      return !cluster || canRestart(cluster);
    },
    execute: async args => {
      const cluster = target(args);
      if (!cluster || !canRestart(cluster)) {
        return;
      }
      await tryRequest(
        `Could not ${restartLabel(cluster).toLowerCase()} ${cluster.name}`,
        () => model.restartCluster(cluster.id)
      );
    }
  });

  commands.addCommand(CommandIDs.shutdown, {
    label: args => {
      const cluster = target(args);
      const label = cluster ? removalLabel(cluster) : 'Shut down';
      return label === 'Shut down' ? 'Shut Down…' : `${label}…`;
    },
    caption: args => {
      const cluster = target(args);
      if (cluster && hasEnded(cluster)) {
        return 'Take the cluster off the list, with its history';
      }
      return cluster && !capabilitiesOf(cluster).can_stop
        ? 'Take the cluster off the list; it keeps running where it was started'
        : 'Stop the scheduler and all workers of the cluster';
    },
    isEnabled: args => {
      const status = target(args)?.status;
      return !!status && status !== 'stopping'; // a stopped (idle) cluster is removed
    },
    execute: async args => {
      const cluster = target(args);
      if (!cluster) {
        return;
      }
      const action = removalLabel(cluster);
      const body = {
        Remove: 'It leaves this list, with its history.',
        Detach:
          'It leaves this list; its scheduler and workers keep running where they were started.',
        'Shut down':
          `Its scheduler and ${plural(cluster.workers.requested, 'worker')} stop, and ` +
          'clients connected to it lose their data.'
      }[action];
      const result = await showDialog({
        title: `${action} ${cluster.name}?`,
        body,
        buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: action })],
        // Enter keeps the cluster: destroying it takes a deliberate click.
        defaultButton: 0
      });
      if (result.button.accept) {
        await tryRequest(
          `Could not ${action.toLowerCase()} ${cluster.name}`,
          () => model.shutdownCluster(cluster.id)
        );
      }
    }
  });
}
