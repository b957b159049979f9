import * as React from 'react';

/**
 * The line under an input: what the value resolves to, or why it cannot be
 * read, followed by any warnings about limits. Only `error` marks the input
 * invalid (its id is the input's `aria-describedby`).
 */
export function Preview(props: {
  id?: string;
  className?: string;
  text: string;
  error?: string | null;
  warnings?: string[];
}): React.ReactElement {
  const { error, warnings = [] } = props;
  return (
    <div className={`cm-Preview ${props.className ?? ''}`} aria-live="polite">
      {error ? (
        <span id={props.id} className="cm-Preview-invalid">
          {error}
        </span>
      ) : (
        <span className="cm-Preview-text">{props.text}</span>
      )}
      {!error &&
        warnings.map(w => (
          <span key={w} className="cm-Preview-warning" role="status">
            {w}
          </span>
        ))}
    </div>
  );
}
