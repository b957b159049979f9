/**
 * The words of the status-bar item: how many clusters are up and how many
 * workers they run. Pure: no DOM, no server.
 */
import { hasEnded } from './cardstate';
import { trans } from './i18n';
import { ICluster } from './types';

/**
 * Clusters not ended (failed or stopped), and the workers they run.
 */
export function clusterTotals(clusters: ReadonlyArray<ICluster>): {
  clusters: number;
  workers: number;
} {
  const up = clusters.filter(c => !hasEnded(c));
  return {
    clusters: up.length,
    workers: up.reduce((sum, c) => sum + (c.workers.running ?? 0), 0)
  };
}

/**
 * "2 clusters · 5 workers".
 */
export function statusSummary(clusters: ReadonlyArray<ICluster>): string {
  const totals = clusterTotals(clusters);
  return trans.__(
    '%1 · %2',
    trans._n('%1 cluster', '%1 clusters', totals.clusters),
    trans._n('%1 worker', '%1 workers', totals.workers)
  );
}
