/**
 * An amount of workers, cores or memory as the editors ask for it: the
 * input(s), the unit, and the preview of what it resolves to with warnings
 * about the server's and the machine's limits.
 */
import { HTMLSelect, InputGroup } from '@jupyterlab/ui-components';
import * as React from 'react';

import { addTotals, limitWarnings } from '../limits';
import { ITotals } from '../spec';
import { AdaptUnit, ILimits } from '../types';
import { FieldError, invalidProps } from './FormDialog';
import { Preview } from './Preview';
import { trans } from '../i18n';

/**
 * The units an amount is given in, with their words (translated when asked).
 */
export const UNITS = (): ReadonlyArray<{ value: AdaptUnit; label: string }> => [
  { value: 'workers', label: trans.__('workers') },
  { value: 'cores', label: trans.__('cores') },
  { value: 'memory', label: trans.__('memory') }
];

/**
 * What a plan is checked against.
 */
export interface IPlanLimits {
  /**
   * The server's limits (if known).
   */
  limits: ILimits | null;
  /**
   * What the rest of the cluster (other groups) adds to the plan.
   */
  others?: ITotals;
  /**
   * Whether the workers run on the server's host (the backend's
   * `runs_processes_here`): the machine's size then bounds them too.
   */
  runsProcessesHere: boolean;
}

export interface IPlanPreviewProps {
  id?: string;
  className: string;
  /**
   * What the value resolves to, in words.
   */
  text: string;
  /**
   * Why the value cannot be read (shown instead of the text).
   */
  error?: string | null;
  /**
   * What is checked against the limits (with `others` added).
   */
  planned: ITotals | null;
  limits: IPlanLimits;
}

/**
 * The line under an amount: what it resolves to, or why it does not read,
 * and the limits the plan would go over.
 */
export function PlanPreview(props: IPlanPreviewProps): React.ReactElement {
  const { planned, limits } = props;
  const warnings = planned
    ? limitWarnings(
        limits.others ? addTotals(limits.others, planned) : planned,
        limits.limits,
        limits.runsProcessesHere
      )
    : [];
  return (
    <Preview
      id={props.id}
      className={props.className}
      text={props.text}
      error={props.error}
      warnings={warnings}
    />
  );
}

/**
 * One input of an amount field.
 */
export interface IAmountInput {
  /**
   * The input's own visible label; without one the field's `label` names it.
   */
  label?: string;
  id?: string;
  className: string;
  value: string;
  onChange: (text: string) => void;
  placeholder?: string;
  /**
   * Why the value is refused, shown under the field (the preview is then
   * hidden).
   */
  message: string | null;
  /**
   * Why the value does not read, shown in the preview line.
   */
  unreadable?: string | null;
  /**
   * The id of the element saying what is wrong (`aria-describedby`).
   */
  errorId: string;
}

export interface IAmountFieldProps {
  /**
   * A label above the row, for a single amount whose input has none.
   */
  label?: string;
  inputs: ReadonlyArray<IAmountInput>;
  unit: AdaptUnit;
  onUnitChange: (unit: AdaptUnit) => void;
  unitClassName: string;
  unitMessage?: string | null;
  unitErrorId?: string;
  preview: Omit<IPlanPreviewProps, 'id' | 'error'>;
}

/**
 * Amount input(s) sharing a unit (a scale target, or an adaptive range's
 * minimum and maximum), the messages about them, and the preview of what
 * they resolve to with its limit warnings.
 */
export function AmountField(props: IAmountFieldProps): React.ReactElement {
  const { inputs, unit } = props;
  const labelled = !props.label;
  const input = (i: IAmountInput) => (
    <InputGroup
      key={i.className}
      id={i.id}
      className={i.className}
      value={i.value}
      onChange={e => i.onChange(e.target.value)}
      placeholder={i.placeholder}
      {...invalidProps(i.errorId, i.message ?? i.unreadable ?? null)}
    />
  );
  const unitSelect = (
    <HTMLSelect
      className={props.unitClassName}
      aria-label={labelled ? undefined : 'Unit'}
      value={unit}
      onChange={e => props.onUnitChange(e.target.value as AdaptUnit)}
      {...(props.unitErrorId
        ? invalidProps(props.unitErrorId, props.unitMessage ?? null)
        : {})}
    >
      {UNITS().map(u => (
        <option key={u.value} value={u.value}>
          {u.label}
        </option>
      ))}
    </HTMLSelect>
  );
  const row = (
    <div className="cm-Field-row">
      {inputs.map(i =>
        labelled ? (
          <label key={i.className} className="cm-Field">
            <span className="cm-Field-label">{i.label}</span>
            {input(i)}
          </label>
        ) : (
          input(i)
        )
      )}
      {labelled ? (
        <label className="cm-Field">
          <span className="cm-Field-label">{trans.__('Unit')}</span>
          {unitSelect}
        </label>
      ) : (
        unitSelect
      )}
    </div>
  );
  const refused = inputs.some(i => i.message);
  const unreadable = inputs.find(i => i.unreadable);
  const messages = (
    <>
      {inputs.map(i => (
        <FieldError key={i.errorId} id={i.errorId} message={i.message} />
      ))}
      {props.unitErrorId && (
        <FieldError
          id={props.unitErrorId}
          message={props.unitMessage ?? null}
        />
      )}
      {!refused && (
        <PlanPreview
          {...props.preview}
          id={unreadable?.errorId}
          error={unreadable?.unreadable}
        />
      )}
    </>
  );
  if (labelled) {
    return (
      <>
        {row}
        {messages}
      </>
    );
  }
  return (
    <div className="cm-Field">
      <label className="cm-Field-label" htmlFor={inputs[0]?.id}>
        {props.label}
      </label>
      {row}
      {messages}
    </div>
  );
}
