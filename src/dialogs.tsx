/**
 * The dialogs a cluster card opens: scale, adaptive mode, Worker Spec.
 * Each stays open when a value is refused (by the form or by the server) and
 * shows the message once, next to the field it is about.
 */
import { Notification } from '@jupyterlab/apputils';
import * as React from 'react';

import { capabilitiesOf } from './capabilities';
import { AdaptiveEditor } from './components/AdaptiveEditor';
import { FormBody, FormError, showFormDialog } from './components/FormDialog';
import { ScaleEditor } from './components/ScaleEditor';
import {
  specShowsError,
  WorkerSpecEditor
} from './components/WorkerSpecEditor';
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
      limits={model.limits}
      scale={async target =>
        (await patch(model, cluster, { scale: target })).resolved
      }
      register={submit => (f.submitHandler = submit)}
    />
  ));
  const resolved = await showFormDialog({
    title: `Scale ${cluster.name}`,
    form,
    acceptLabel: 'Scale'
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
      limits={model.limits}
      patch={request => patch(model, cluster, request)}
      register={submit => (f.submitHandler = submit)}
    />
  ));
  return !!(await showFormDialog({
    title: `Adaptive mode of ${cluster.name}`,
    form,
    acceptLabel: 'Apply'
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
        limits={model.limits}
        runsProcessesHere={capabilities.runs_processes_here}
        multipleGroups={capabilities.multiple_groups}
      />
      <p className="cm-Form-note">
        The new spec replaces the current one: workers are started or stopped to
        match it.
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
    title: `Worker Spec of ${cluster.name}`,
    form,
    acceptLabel: 'Apply'
  });
}
