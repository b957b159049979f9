/**
 * The user options a template declares (walltime, partition, account...),
 * as form fields of the New Cluster dialog.
 */
import { HTMLSelect, InputGroup } from '@jupyterlab/ui-components';
import * as React from 'react';

import { ClusterManagerError } from '../request';
import { IUserOption, OptionValue } from '../types';
import { FieldError, fieldMessage, invalidProps } from './FormDialog';
import { trans } from '../i18n';

/**
 * What the user typed or chose, by option name (numbers as text until sent).
 */
export type UserOptionDrafts = { [name: string]: string | boolean };

/**
 * The drafts of a template's options: their defaults.
 */
export function userOptionDrafts(options: IUserOption[]): UserOptionDrafts {
  const drafts: UserOptionDrafts = {};
  for (const option of options) {
    drafts[option.name] =
      option.type === 'boolean' ? !!option.default : String(option.default);
  }
  return drafts;
}

/**
 * The `options` of a create request. A number that does not parse is sent
 * as typed, so that the server names the option in its answer.
 */
export function userOptionsRequest(
  options: IUserOption[],
  drafts: UserOptionDrafts
): { [name: string]: OptionValue } {
  const request: { [name: string]: OptionValue } = {};
  for (const option of options) {
    const draft = drafts[option.name] ?? option.default;
    if (option.type === 'boolean' || typeof draft === 'boolean') {
      request[option.name] = !!draft;
    } else if (option.type === 'integer' || option.type === 'number') {
      const text = draft.trim();
      const value = Number(text);
      request[option.name] =
        text !== '' && Number.isFinite(value) ? value : text;
    } else {
      request[option.name] = draft;
    }
  }
  return request;
}

/**
 * "walltime 00:20:00 · nice 5", for a card.
 */
export function formatOptions(options: {
  [name: string]: OptionValue;
}): string {
  return Object.entries(options)
    .map(([name, value]) => `${name} ${String(value)}`)
    .join(' · ');
}

/**
 * One field per user option: a list when it has choices, a checkbox for a
 * boolean, a number or text input otherwise; the server's message below it.
 */
export function UserOptionsFields(props: {
  options: IUserOption[];
  drafts: UserOptionDrafts;
  onChange: (drafts: UserOptionDrafts) => void;
  error: ClusterManagerError | null;
}): React.ReactElement | null {
  const { options, drafts } = props;
  if (!options.length) {
    return null;
  }
  const set = (name: string, value: string | boolean) =>
    props.onChange({ ...drafts, [name]: value });
  return (
    <div className="cm-UserOptions">
      <h3 className="cm-Form-heading">{trans.__('Options')}</h3>
      {options.map(option => {
        const id = `cm-new-option-${option.name}`;
        const message = fieldMessage(props.error, `options.${option.name}`);
        const draft = drafts[option.name] ?? option.default;
        const bounds = [
          option.minimum !== null ? `≥ ${option.minimum}` : '',
          option.maximum !== null ? `≤ ${option.maximum}` : ''
        ]
          .filter(Boolean)
          .join(', ');
        let input: React.ReactElement;
        if (option.type === 'boolean') {
          input = (
            <input
              type="checkbox"
              className="jp-mod-styled cm-UserOption-input"
              data-option={option.name}
              checked={!!draft}
              onChange={e => set(option.name, e.target.checked)}
              {...invalidProps(`${id}-error`, message)}
            />
          );
        } else if (option.choices) {
          input = (
            <HTMLSelect
              className="cm-UserOption-input"
              data-option={option.name}
              value={String(draft)}
              onChange={e => set(option.name, e.target.value)}
              {...invalidProps(`${id}-error`, message)}
            >
              {option.choices.map(choice => (
                <option key={String(choice)} value={String(choice)}>
                  {String(choice)}
                </option>
              ))}
            </HTMLSelect>
          );
        } else {
          const numeric = option.type === 'integer' || option.type === 'number';
          input = (
            <InputGroup
              className="cm-UserOption-input"
              data-option={option.name}
              inputMode={numeric ? 'decimal' : undefined}
              value={String(draft)}
              onChange={e => set(option.name, e.target.value)}
              {...invalidProps(`${id}-error`, message)}
            />
          );
        }
        return (
          <React.Fragment key={option.name}>
            <label
              className="cm-Field cm-UserOption"
              title={option.description}
            >
              <span className="cm-Field-label">
                {option.label}
                {bounds ? ` (${bounds})` : ''}
              </span>
              {input}
            </label>
            <FieldError id={`${id}-error`} message={message} />
          </React.Fragment>
        );
      })}
    </div>
  );
}
