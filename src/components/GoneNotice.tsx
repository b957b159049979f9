import { closeIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { plural } from '../format';
import { IGoneReport } from '../gone';

/**
 * Says which clusters left the list unannounced, and what that means.
 */
export function GoneNotice(props: {
  report: IGoneReport;
  onDismiss: () => void;
}): React.ReactElement {
  const { names, observed, afterOutage } = props.report;
  const clusters = plural(names.length, 'cluster');
  return (
    <div className="cm-GoneNotice" role="status">
      {names.length > 0 && (
        <>
          <p>
            {afterOutage
              ? `While the connection to the server was down, ${clusters} stopped: `
              : `${clusters[0].toUpperCase()}${clusters.slice(1)} stopped without notice: `}
            <span className="cm-GoneNotice-names">{names.join(', ')}</span>.
          </p>
          <p>
            {afterOutage
              ? 'They were shut down, or the server restarted and could not take them back. '
              : 'They were shut down elsewhere (another tab, a script or the CLI). '}
            Their workers, and any data held in them, are gone; clients
            connected to them need a new cluster.
          </p>
        </>
      )}
      {observed.length > 0 && (
        <p>
          {'No longer listed: '}
          <span className="cm-GoneNotice-names">{observed.join(', ')}</span>
          {'. '}
          {observed.length === 1 ? 'It was' : 'They were'} started elsewhere and
          may still run there, with their data; attach again by address if
          needed.
        </p>
      )}
      <button
        type="button"
        className="jp-mod-styled cm-IconButton cm-GoneNotice-dismiss"
        aria-label="Dismiss"
        title="Dismiss"
        onClick={props.onDismiss}
      >
        <closeIcon.react tag="span" />
      </button>
    </div>
  );
}
