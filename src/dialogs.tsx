/**
 * The dialogs a cluster card opens: scale, adaptive mode, Worker Spec,
 * rename, idle timeout; and Attach.
 * Each stays open when a value is refused (by the form or by the server) and
 * shows the message once, next to the field it is about.
 */
import { InputGroup } from '@jupyterlab/ui-components';
import { Notification } from '@jupyterlab/apputils';
import * as React from 'react';

import { capabilitiesOf } from './capabilities';
import { attachOutcome, AttachOutcome } from './attach';
import { AdaptiveEditor } from './components/AdaptiveEditor';
import {
  FieldError,
  FormBody,
  FormError,
  invalidProps,
  showFormDialog
} from './components/FormDialog';
import { ScaleEditor } from './components/ScaleEditor';
import {
  specShowsError,
  WorkerSpecEditor
} from './components/WorkerSpecEditor';
import { formatIdleTimeout, parseIdleTimeout } from './duration';
import { ClustersModel } from './model';
import { asServerError, ClusterManagerError } from './request';
import {
  draftFromGroup,
  formatTotals,
  IGroupDraft,
  specIsValid,
  specRequest
} from './spec';
import { ICluster, IResolution, PatchClusterRequest } from './types';
import { stripField } from './validate';
import { trans } from './i18n';

/**
 * PATCH a cluster; the form shows what the server refuses, so there is no
 * notification on top.
 */
function patch(
  model: ClustersModel,
  cluster: ICluster,
  request: PatchClusterRequest
) {
  return model.patchCluster(cluster.id, request);
}

export async function showScaleDialog(
  model: ClustersModel,
  cluster: ICluster
): Promise<IResolution | null> {
  const form = new FormBody<IResolution>(f => (
    <ScaleEditor
      cluster={cluster}
      limits={model.limitsFor(cluster.id)}
      scale={async target =>
        (await patch(model, cluster, { scale: target })).resolved
      }
      register={submit => (f.submitHandler = submit)}
    />
  ));
  const resolved = await showFormDialog({
    title: trans.__('Scale %1', cluster.name),
    form,
    acceptLabel: trans.__('Scale')
  });
  if (resolved) {
    Notification.info(
      `${cluster.name}: ${resolved.group} ${formatTotals(resolved)}`,
      { autoClose: 5000 }
    );
  }
  return resolved;
}

export async function showAdaptiveDialog(
  model: ClustersModel,
  cluster: ICluster
): Promise<boolean> {
  const form = new FormBody<boolean>(f => (
    <AdaptiveEditor
      cluster={cluster}
      limits={model.limitsFor(cluster.id)}
      patch={request => patch(model, cluster, request)}
      register={submit => (f.submitHandler = submit)}
    />
  ));
  return !!(await showFormDialog({
    title: trans.__('Adaptive mode of %1', cluster.name),
    form,
    acceptLabel: trans.__('Apply')
  }));
}

function SpecForm(props: {
  model: ClustersModel;
  cluster: ICluster;
  form: FormBody<ICluster>;
}): React.ReactElement {
  const { model, cluster } = props;
  const capabilities = capabilitiesOf(cluster);
  const [groups, setGroups] = React.useState<IGroupDraft[]>(
    cluster.spec.groups.map(draftFromGroup)
  );
  const [error, setError] = React.useState<ClusterManagerError | null>(null);
  props.form.submitHandler = async () => {
    if (!specIsValid(groups)) {
      // The fields already say what is wrong.
      return null;
    }
    try {
      return await patch(model, cluster, { spec: specRequest(groups) });
    } catch (e) {
      setError(asServerError(e));
      return null;
    }
  };
  return (
    <div className="cm-SpecForm">
      <FormError
        error={error}
        shownInline={specShowsError(error, 'spec')}
        groupNames={groups.map(g => g.name)}
      />
      <WorkerSpecEditor
        groups={groups}
        onChange={next => {
          setGroups(next);
          setError(null);
        }}
        error={error}
        field="spec"
        idPrefix="cm-spec"
        limits={model.limitsFor(cluster.id)}
        runsProcessesHere={capabilities.runs_processes_here}
        multipleGroups={capabilities.multiple_groups}
      />
      <p className="cm-Form-note">
        {trans.__(
          'The new spec replaces the current one: workers are started or stopped to match it.'
        )}
      </p>
    </div>
  );
}

export async function showSpecDialog(
  model: ClustersModel,
  cluster: ICluster
): Promise<ICluster | null> {
  const form = new FormBody<ICluster>(f => (
    <SpecForm model={model} cluster={cluster} form={f} />
  ));
  return showFormDialog({
    title: trans.__('Worker Spec of %1', cluster.name),
    form,
    acceptLabel: trans.__('Apply')
  });
}

/**
 * How long the Attach dialog waits for the server to reach the scheduler
 * before it closes and leaves the card to tell (the server's own connect
 * timeout is shorter).
 */
const ATTACH_WAIT_MS = 60000;

/**
 * Resolve with what became of an attach: once the listed cluster is no
 * longer pending, or `waiting` after `ms`.
 */
function settledAttach(
  model: ClustersModel,
  id: string,
  ms: number
): Promise<AttachOutcome> {
  return new Promise(resolve => {
    const check = () => {
      const outcome = attachOutcome(model.get(id));
      if (outcome.state !== 'waiting' || !model.get(id)) {
        done(outcome);
      }
    };
    const done = (outcome: AttachOutcome) => {
      clearTimeout(timer);
      model.changed.disconnect(check);
      resolve(outcome);
    };
    const timer = setTimeout(() => done({ state: 'waiting' }), ms);
    model.changed.connect(check);
    // The cluster may not be listed yet when the POST answers.
    if (model.get(id)) {
      check();
    }
  });
}

function AttachForm(props: {
  model: ClustersModel;
  form: FormBody<ICluster>;
  address: string;
}): React.ReactElement {
  const { model } = props;
  const [address, setAddress] = React.useState(props.address);
  const [error, setError] = React.useState<string | null>(null);
  props.form.submitHandler = async () => {
    const target = address.trim();
    if (!target) {
      setError(
        trans.__('Enter the scheduler address, e.g. tcp://127.0.0.1:8786')
      );
      return null;
    }
    setError(null);
    let cluster: ICluster;
    try {
      cluster = await model.createCluster({ attach: target });
    } catch (e) {
      setError(asServerError(e).message);
      return null;
    }
    const outcome = await settledAttach(model, cluster.id, ATTACH_WAIT_MS);
    if (outcome.state === 'failed') {
      // Nothing was attached: the failed entry leaves the list again.
      if (model.get(cluster.id)) {
        await model.shutdownCluster(cluster.id).catch(() => undefined);
      }
      setError(outcome.reason);
      return null;
    }
    return cluster;
  };
  return (
    <div className="cm-AttachForm">
      <label className="cm-Field">
        <span className="cm-Field-label">{trans.__('Scheduler address')}</span>
        <InputGroup
          className="cm-AttachForm-address"
          value={address}
          placeholder="tcp://127.0.0.1:8786"
          onChange={e => {
            setAddress(e.target.value);
            setError(null);
          }}
          {...invalidProps('cm-attach-error', error)}
        />
      </label>
      <FieldError id="cm-attach-error" message={error} />
      <p className="cm-Form-note">
        {trans.__(
          'The cluster is observed, never scaled or stopped from here; the dialog stays open until its scheduler answers.'
        )}
      </p>
    </div>
  );
}

/**
 * Attach a cluster started elsewhere. The dialog stays open until the
 * server has reached the scheduler, and shows why when it cannot.
 */
export async function showAttachDialog(
  model: ClustersModel,
  address = ''
): Promise<ICluster | null> {
  const form = new FormBody<ICluster>(f => (
    <AttachForm model={model} form={f} address={address} />
  ));
  return showFormDialog({
    title: trans.__('Attach a cluster started elsewhere'),
    form,
    acceptLabel: trans.__('Attach')
  });
}

/**
 * One text field that PATCHes the cluster on accept; the dialog stays open
 * with the reason when the text does not read or the server refuses it.
 */
function OneFieldForm(props: {
  form: FormBody<ICluster>;
  label: string;
  initial: string;
  hint: string;
  /** The request for the text; throws with a message when it does not read. */
  request: (text: string) => PatchClusterRequest;
  send: (request: PatchClusterRequest) => Promise<ICluster>;
}): React.ReactElement {
  const [text, setText] = React.useState(props.initial);
  const [error, setError] = React.useState<string | null>(null);
  props.form.submitHandler = async () => {
    let request: PatchClusterRequest;
    try {
      request = props.request(text);
    } catch (e) {
      setError((e as Error).message);
      return null;
    }
    try {
      return await props.send(request);
    } catch (e) {
      setError(stripField(asServerError(e).message, asServerError(e).field));
      return null;
    }
  };
  return (
    <div className="cm-OneFieldForm">
      <label className="cm-Field">
        <span className="cm-Field-label">{props.label}</span>
        <InputGroup
          className="cm-OneFieldForm-input"
          value={text}
          onChange={e => {
            setText(e.target.value);
            setError(null);
          }}
          {...invalidProps('cm-onefield-error', error)}
        />
      </label>
      <FieldError id="cm-onefield-error" message={error} />
      <p className="cm-Form-note">{props.hint}</p>
    </div>
  );
}

export async function showRenameDialog(
  model: ClustersModel,
  cluster: ICluster
): Promise<ICluster | null> {
  const form = new FormBody<ICluster>(f => (
    <OneFieldForm
      form={f}
      label={trans.__('Name')}
      initial={cluster.name}
      hint={trans.__(
        "Notebooks that connect by the cluster's id keep working."
      )}
      request={text => {
        if (!text.trim()) {
          throw new Error(trans.__('Enter a name'));
        }
        return { name: text.trim() };
      }}
      send={request => patch(model, cluster, request)}
    />
  ));
  return showFormDialog({
    title: trans.__('Rename %1', cluster.name),
    form,
    acceptLabel: trans.__('Rename')
  });
}

export async function showIdleTimeoutDialog(
  model: ClustersModel,
  cluster: ICluster
): Promise<ICluster | null> {
  const form = new FormBody<ICluster>(f => (
    <OneFieldForm
      form={f}
      label={trans.__('Shut down after being idle for')}
      initial={
        cluster.idle_timeout ? formatIdleTimeout(cluster.idle_timeout) : 'off'
      }
      hint={trans.__(
        'Idle: no tasks and no client connected. Write e.g. 30 min, 2 h, or off to keep it running.'
      )}
      request={text => ({ idle_timeout: parseIdleTimeout(text) })}
      send={request => patch(model, cluster, request)}
    />
  ));
  return showFormDialog({
    title: trans.__('Idle timeout of %1', cluster.name),
    form,
    acceptLabel: trans.__('Apply')
  });
}
