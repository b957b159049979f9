import * as React from 'react';

import { ICluster } from '../types';

/**
 * Whether a cluster was started elsewhere (attached, or discovered in a
 * notebook): this server observes it, and never scales or stops it.
 */
export function isExternal(cluster: ICluster): boolean {
  return cluster.backend === 'external';
}

/**
 * The "external" mark of a card, saying where the cluster came from.
 */
export function ExternalBadge(props: {
  cluster: ICluster;
}): React.ReactElement | null {
  const { cluster } = props;
  if (!isExternal(cluster)) {
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
