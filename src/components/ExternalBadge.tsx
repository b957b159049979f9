import * as React from 'react';

import { onlyObserved } from '../capabilities';
import { ICluster } from '../types';

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
      ? 'started in a notebook of this server'
      : 'attached by its scheduler address';
  return (
    <span
      className="cm-ExternalBadge"
      title={`Started elsewhere (${origin}): observed here, never scaled or stopped`}
      aria-label={`External cluster, ${origin}`}
    >
      external
    </span>
  );
}
