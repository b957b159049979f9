import * as React from 'react';

import { onlyObserved } from '../capabilities';
import { ICluster } from '../types';
import { trans } from '../i18n';

/**
 * The "external" mark of a card, saying where the cluster came from.
 */
export function ExternalBadge(props: {
  cluster: ICluster;
}): React.ReactElement | null {
  const { cluster } = props;
  // Started elsewhere (attached, or discovered in a notebook): this server
  // observes it and cannot stop it.
  if (!onlyObserved(cluster)) {
    return null;
  }
  const origin =
    cluster.template === 'discovered'
      ? trans.__('started in a notebook of this server')
      : trans.__('attached by its scheduler address');
  return (
    <span
      className="cm-ExternalBadge"
      title={trans.__(
        'Started elsewhere (%1): observed here, never scaled or stopped',
        origin
      )}
      aria-label={trans.__('External cluster, %1', origin)}
    >
      {trans.__('external')}
    </span>
  );
}
