import { Dialog, ReactWidget } from '@jupyterlab/apputils';
import * as React from 'react';

import { ClusterManagerError } from '../request';
import { fieldLabel, stripField } from '../validate';

/**
 * The body of a form dialog. Its React content registers a submit handler
 * (`submitHandler`); the dialog stays open while the handler runs and when it
 * answers `null` (e.g. the server refused a value, shown next to the field).
 */
export class FormBody<T> extends ReactWidget {
  constructor(render: (form: FormBody<T>) => React.ReactElement) {
    super();
    this._render = render;
    this.addClass('cm-Form');
  }

  /**
   * Set by the content: what "accept" does. Resolves with the dialog's value,
   * or `null` to keep the dialog open.
   */
  submitHandler: (() => Promise<T | null>) | null = null;

  async submit(): Promise<boolean> {
    const value = this.submitHandler ? await this.submitHandler() : null;
    if (value === null) {
      return false;
    }
    this._value = value;
    return true;
  }

  getValue(): T | null {
    return this._value;
  }

  protected render(): React.ReactElement {
    return this._render(this);
  }

  private _render: (form: FormBody<T>) => React.ReactElement;
  private _value: T | null = null;
}

/**
 * A dialog whose accept button runs the form's asynchronous submit first.
 */
class FormDialog<T> extends Dialog<T | null> {
  constructor(options: Partial<Dialog.IOptions<T | null>>, form: FormBody<T>) {
    super(options);
    this._form = form;
    this._buttonList = options.buttons ?? [];
  }

  resolve(index?: number): void {
    const i = index ?? this._buttonList.length - 1;
    if (!this._buttonList[i]?.accept) {
      super.resolve(i);
      return;
    }
    if (this._busy) {
      return;
    }
    this._setBusy(true);
    this._form
      .submit()
      .then(ok => {
        this._setBusy(false);
        if (ok) {
          super.resolve(i);
        }
      })
      .catch(error => {
        this._setBusy(false);
        console.error(error);
      });
  }

  private _setBusy(busy: boolean): void {
    this._busy = busy;
    this.node
      .querySelectorAll<HTMLButtonElement>('.jp-mod-accept')
      .forEach(b => {
        b.disabled = busy;
      });
    this.node.setAttribute('aria-busy', busy ? 'true' : 'false');
  }

  private _form: FormBody<T>;
  private _buttonList: ReadonlyArray<Dialog.IButton>;
  private _busy = false;
}

/**
 * Show a form in a dialog. Resolves with its value, or `null` when cancelled.
 */
export async function showFormDialog<T>(options: {
  title: string;
  form: FormBody<T>;
  acceptLabel: string;
}): Promise<T | null> {
  const dialog = new FormDialog<T>(
    {
      title: options.title,
      body: options.form,
      buttons: [
        Dialog.cancelButton(),
        Dialog.okButton({ label: options.acceptLabel })
      ],
      focusNodeSelector: 'input, select',
      hasClose: true
    },
    options.form
  );
  dialog.addClass('cm-FormDialog');
  const result = await dialog.launch();
  return result.button.accept ? result.value : null;
}

/**
 * The server's message when it is about exactly this request field.
 */
export function fieldMessage(
  error: ClusterManagerError | null,
  field: string
): string | null {
  if (!error || error.field !== field) {
    return null;
  }
  // Next to the field, the field's name in front of the message is redundant.
  return stripField(error.message, field);
}

/**
 * A message shown next to (below) a field, referenced by its `aria-describedby`.
 */
export function FieldError(props: {
  id: string;
  message: string | null;
}): React.ReactElement | null {
  if (!props.message) {
    return null;
  }
  return (
    <div id={props.id} className="cm-FieldError" role="alert">
      {props.message}
    </div>
  );
}

/**
 * Props for an input that may carry a server message.
 */
export function invalidProps(
  id: string,
  message: string | null
): { 'aria-invalid': boolean; 'aria-describedby'?: string } {
  return message
    ? { 'aria-invalid': true, 'aria-describedby': id }
    : { 'aria-invalid': false };
}

/**
 * A form-level error: shown when the server's message is not about one of
 * the form's fields; the field it names is given in the form's words.
 */
export function FormError(props: {
  error: ClusterManagerError | null;
  shownInline: boolean;
  /**
   * The form's group names, to name `spec.groups[i]` fields.
   */
  groupNames?: string[];
}): React.ReactElement | null {
  if (!props.error || props.shownInline) {
    return null;
  }
  const { error } = props;
  const message = stripField(error.message, error.field);
  return (
    <div className="cm-FormError" role="alert">
      {error.field
        ? `${fieldLabel(error.field, props.groupNames)}: ${message}`
        : message}
    </div>
  );
}
