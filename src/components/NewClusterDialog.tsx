import { HTMLSelect, InputGroup } from '@jupyterlab/ui-components';
import * as React from 'react';

import { capabilitiesOf, offReason } from '../capabilities';
import { ClustersModel } from '../model';
import { asServerError, ClusterManagerError } from '../request';
import {
  draftFromGroup,
  formatTotals,
  IGroupDraft,
  ITotals,
  perWorkerOfDraft,
  specIsValid,
  specRequest,
  specTotals
} from '../spec';
import { ICluster, ITemplate } from '../types';
import {
  adaptDraft,
  AdaptRangeFields,
  adaptRequest,
  IAdaptDraft,
  rangeProblems
} from './AdaptiveEditor';
import {
  FieldError,
  fieldMessage,
  FormBody,
  FormError,
  invalidProps,
  showFormDialog
} from './FormDialog';
import {
  UserOptionDrafts,
  userOptionDrafts,
  UserOptionsFields,
  userOptionsRequest
} from './UserOptionsFields';
import { specShowsError, WorkerSpecEditor } from './WorkerSpecEditor';
import { trans } from '../i18n';

/**
 * What a template gives by default, in one line.
 */
export function templateSummary(template: ITemplate): string {
  const drafts = template.spec.groups.map(draftFromGroup);
  const sum = specTotals(drafts);
  const parts = [template.backend];
  if (sum) {
    parts.push(formatTotals(sum).replace(/^→ /, ''));
  }
  const adapt = adaptDraft(template.adapt);
  if (template.adapt) {
    parts.push(
      trans.__('adaptive %1–%2 %3', adapt.minimum, adapt.maximum, adapt.unit)
    );
  }
  if (template.user_options?.length) {
    parts.push(
      trans.__('options: %1', template.user_options.map(o => o.name).join(', '))
    );
  }
  return parts.join(' · ');
}

/**
 * What the groups other than `except` add up to, if they all read.
 */
function otherDraftTotals(
  groups: IGroupDraft[],
  except: IGroupDraft | undefined
): ITotals | undefined {
  return specTotals(groups.filter(g => g !== except)) ?? undefined;
}

interface INewClusterFormProps {
  model: ClustersModel;
  templates: ITemplate[];
  initialTemplate: string;
  form: FormBody<ICluster>;
}

/**
 * Choose a template, name the cluster, and adjust its Worker Spec and
 * adaptive range (prefilled from the template).
 */
function NewClusterForm(props: INewClusterFormProps): React.ReactElement {
  const { templates } = props;
  const [templateName, setTemplateName] = React.useState(props.initialTemplate);
  const template = templates.find(t => t.name === templateName) ?? templates[0];
  const [name, setName] = React.useState('');
  const [groups, setGroups] = React.useState<IGroupDraft[]>(
    template ? template.spec.groups.map(draftFromGroup) : []
  );
  const [adapt, setAdaptDraft] = React.useState<IAdaptDraft>(
    adaptDraft(template?.adapt)
  );
  const setAdapt = (next: IAdaptDraft) => {
    setAdaptDraft(next);
    setError(null);
  };
  const [adaptGroup, setAdaptGroup] = React.useState(
    template?.adapt?.group ?? template?.spec.groups[0]?.name ?? ''
  );
  const [optionDrafts, setOptionDrafts] = React.useState<UserOptionDrafts>(
    userOptionDrafts(template?.user_options ?? [])
  );
  const [error, setError] = React.useState<ClusterManagerError | null>(null);
  const userOptions = template?.user_options ?? [];

  const choose = (next: ITemplate) => {
    setOptionDrafts(userOptionDrafts(next.user_options ?? []));
    setTemplateName(next.name);
    setGroups(next.spec.groups.map(draftFromGroup));
    setAdaptDraft(adaptDraft(next.adapt));
    setAdaptGroup(next.adapt?.group ?? next.spec.groups[0]?.name ?? '');
    setError(null);
  };

  props.form.submitHandler = async () => {
    const adaptProblems = rangeProblems(adapt);
    if (
      !specIsValid(groups) ||
      (adapt.on && (adaptProblems.minimum || adaptProblems.maximum))
    ) {
      // The fields already say what is wrong.
      return null;
    }
    const groupNames = groups.map(g => g.name.trim());
    const group = groupNames.includes(adaptGroup) ? adaptGroup : groupNames[0];
    try {
      return await props.model.createCluster({
        template: template?.name,
        ...(name.trim() ? { name: name.trim() } : {}),
        spec: specRequest(groups),
        adapt: adapt.on
          ? adaptRequest(adapt, groups.length > 1 ? group : undefined)
          : null,
        ...(userOptions.length
          ? { options: userOptionsRequest(userOptions, optionDrafts) }
          : {})
      });
    } catch (e) {
      const serverError = asServerError(e);
      setError(serverError);
      return null;
    }
  };

  const nameMessage = fieldMessage(error, 'name');
  const templateMessage = fieldMessage(error, 'template');
  const adaptInline = !!error?.field?.startsWith('adapt') && adapt.on;
  const optionInline = userOptions.some(
    o => error?.field === `options.${o.name}`
  );
  const shownInline =
    !!(nameMessage || templateMessage) ||
    optionInline ||
    specShowsError(error, 'spec') ||
    adaptInline;
  const adaptDraftGroup = groups.find(g => g.name === adaptGroup) ?? groups[0];
  const capabilities = capabilitiesOf(template);

  return (
    <div className="cm-NewCluster">
      <FormError
        error={error}
        shownInline={shownInline}
        groupNames={groups.map(g => g.name)}
      />
      <div
        className="cm-TemplateList"
        role="radiogroup"
        aria-label={trans.__('Template')}
        {...invalidProps('cm-new-template-error', templateMessage)}
      >
        {templates.map(t => (
          <label
            key={t.name}
            className={`cm-Template${
              t.name === template?.name ? ' jp-mod-selected' : ''
            }${t.available === false ? ' cm-mod-unavailable' : ''}`}
            data-template={t.name}
          >
            <input
              type="radio"
              name="cm-template"
              value={t.name}
              checked={t.name === template?.name}
              disabled={t.available === false}
              onChange={() => choose(t)}
            />
            <span className="cm-Template-text">
              <span className="cm-Template-name">{t.name}</span>
              <span className="cm-Template-description">{t.description}</span>
              <span className="cm-Template-defaults">{templateSummary(t)}</span>
              {t.available === false && (
                <span className="cm-Template-unavailable" role="note">
                  {trans.__(
                    'Not available here: %1',
                    t.unavailable_reason ??
                      trans.__('its backend cannot work on this server')
                  )}
                </span>
              )}
            </span>
          </label>
        ))}
      </div>
      <FieldError id="cm-new-template-error" message={templateMessage} />
      <label className="cm-Field">
        <span className="cm-Field-label">{trans.__('Name')}</span>
        <InputGroup
          className="cm-NewCluster-name"
          value={name}
          placeholder={trans.__('Cluster N')}
          onChange={e => {
            setName(e.target.value);
            setError(null);
          }}
          {...invalidProps('cm-new-name-error', nameMessage)}
        />
      </label>
      <FieldError id="cm-new-name-error" message={nameMessage} />
      <UserOptionsFields
        options={userOptions}
        drafts={optionDrafts}
        onChange={setOptionDrafts}
        error={error}
      />
      <h3 className="cm-Form-heading">{trans.__('Worker Spec')}</h3>
      <WorkerSpecEditor
        groups={groups}
        onChange={next => {
          setGroups(next);
          setError(null);
        }}
        error={error}
        field="spec"
        idPrefix="cm-new"
        limits={props.model.limitsFor()}
        runsProcessesHere={capabilities.runs_processes_here}
        multipleGroups={capabilities.multiple_groups}
        shapeLocked={offReason(
          template,
          'editable_spec',
          trans.__('The template sets the threads and memory of its workers')
        )}
        singleGroupReason={offReason(
          template,
          'multiple_groups',
          trans.__('This backend runs a single group of workers')
        )}
      />
      {groups.length > 1 && adapt.on && (
        <label className="cm-Field">
          <span className="cm-Field-label">{trans.__('Adaptive group')}</span>
          <HTMLSelect
            className="cm-NewCluster-adaptGroup"
            value={adaptDraftGroup?.name}
            onChange={e => setAdaptGroup(e.target.value)}
          >
            {groups.map(g => (
              <option key={g.name} value={g.name}>
                {g.name}
              </option>
            ))}
          </HTMLSelect>
        </label>
      )}
      <AdaptRangeFields
        label={adaptDraftGroup?.name ?? ''}
        draft={adapt}
        onChange={setAdapt}
        perWorker={adaptDraftGroup ? perWorkerOfDraft(adaptDraftGroup) : null}
        error={adaptInline ? error : null}
        field="adapt"
        idPrefix="cm-new-adapt"
        limits={props.model.limitsFor()}
        others={otherDraftTotals(groups, adaptDraftGroup)}
        runsProcessesHere={capabilities.runs_processes_here}
      />
    </div>
  );
}

/**
 * The New Cluster dialog. Resolves with the pending cluster the server
 * answered, or `null` when cancelled.
 */
export function showNewClusterDialog(options: {
  model: ClustersModel;
  templates: ITemplate[];
  defaultTemplate: string;
}): Promise<ICluster | null> {
  const { templates } = options;
  const usable = templates.filter(t => t.available !== false);
  const initial = usable.some(t => t.name === options.defaultTemplate)
    ? options.defaultTemplate
    : (usable[0]?.name ?? templates[0]?.name ?? '');
  const form = new FormBody<ICluster>(f => (
    <NewClusterForm
      model={options.model}
      templates={templates}
      initialTemplate={initial}
      form={f}
    />
  ));
  return showFormDialog({
    title: trans.__('New Cluster'),
    form,
    acceptLabel: trans.__('Create')
  });
}
