import { Button, closeIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { IGoneReport } from '../gone';
import { trans } from '../i18n';

/**
 * Says which clusters left the list unannounced, and what that means.
 */
export function GoneNotice(props: {
  report: IGoneReport;
  onDismiss: () => void;
}): React.ReactElement {
  const { names, observed, afterOutage } = props.report;
  return (
    <div className="cm-GoneNotice" role="status">
      {names.length > 0 && (
        <>
          <p>
            {afterOutage
              ? trans._n(
                  'While the connection to the server was down, %1 cluster stopped: ',
                  'While the connection to the server was down, %1 clusters stopped: ',
                  names.length
                )
              : trans._n(
                  '%1 cluster stopped without notice: ',
                  '%1 clusters stopped without notice: ',
                  names.length
                )}
            <span className="cm-GoneNotice-names">{names.join(', ')}</span>.
          </p>
          <p>
            {afterOutage
              ? trans.__(
                  'They were shut down, or the server restarted and could not take them back. '
                )
              : trans.__(
                  'They were shut down elsewhere (another tab, a script or the CLI). '
                )}
            {trans.__(
              'Their workers, and any data held in them, are gone; clients connected to them need a new cluster.'
            )}
          </p>
        </>
      )}
      {observed.length > 0 && (
        <p>
          {trans.__('No longer listed: ')}
          <span className="cm-GoneNotice-names">{observed.join(', ')}</span>
          {'. '}
          {trans._n(
            'It was started elsewhere and may still run there, with its data; attach it again by address if needed.',
            'They were started elsewhere and may still run there, with their data; attach them again by address if needed.',
            observed.length
          )}
        </p>
      )}
      <Button
        type="button"
        className="jp-mod-styled cm-IconButton cm-GoneNotice-dismiss"
        aria-label={trans.__('Dismiss')}
        title={trans.__('Dismiss')}
        onClick={props.onDismiss}
      >
        <closeIcon.react tag="span" />
      </Button>
    </div>
  );
}
