/**
 * Commands that change a cluster: scale, adaptive mode, Worker Spec, and
 * shut down (or detach, for a cluster this server cannot stop).
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';

import { capabilitiesOf, offReason } from './capabilities';
import { ICommandContext } from './commandcontext';
import { showAdaptiveDialog, showScaleDialog, showSpecDialog } from './dialogs';
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

  commands.addCommand(CommandIDs.shutdown, {
    label: 'Shut Down…',
    caption: 'Stop the scheduler and all workers of the cluster',
    isEnabled: args => {
      const status = target(args)?.status;
      return !!status && status !== 'stopping'; // a stopped (idle) cluster is removed
    },
    execute: async args => {
      const cluster = target(args);
      if (!cluster) {
        return;
      }
      const detach = !capabilitiesOf(cluster).can_stop;
      const result = await showDialog({
        title: `${detach ? 'Detach' : 'Shut down'} ${cluster.name}?`,
        body: detach
          ? 'It leaves this list; its scheduler and workers keep running where they were started.'
          : `Its scheduler and ${plural(cluster.workers.requested, 'worker')} stop, and ` +
            'clients connected to it lose their data.',
        buttons: [
          Dialog.cancelButton(),
          Dialog.warnButton({ label: detach ? 'Detach' : 'Shut down' })
        ]
      });
      if (result.button.accept) {
        await tryRequest(`Could not shut down ${cluster.name}`, () =>
          model.shutdownCluster(cluster.id)
        );
      }
    }
  });
}
