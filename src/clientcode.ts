import { ICluster } from './types';

/**
 * What the client code needs to know of a cluster.
 */
export type Connectable = Pick<
  ICluster,
  'id' | 'name' | 'scheduler_address' | 'tls'
>;

/**
 * The lines that let go of what a previously inserted cell made (its client,
 * and its cluster object, which keeps the cluster running), so that inserting
 * again replaces them rather than leaving one more connection open.
 */
const CLOSE_PREVIOUS = [
  'if isinstance(globals().get("client"), Client):',
  '    client.close()  # the client of a cell inserted before',
  'if isinstance(globals().get("cluster"), clustermgr_lab.JupyterServerCluster):',
  '    cluster.close()  # lets go of the cluster of a cell inserted before; it keeps running'
];

/**
 * The code that makes the cluster's `distributed` Cluster object and a client
 * of it, replacing those a previously inserted cell made, and shows the
 * cluster (its last line: the widget, or the repr, with the dashboard link).
 *
 * `clustermgr_lab.get_cluster(name)` asks this server for the cluster by the
 * name the card shows (names are unique on a server; found on its own from
 * a kernel), connects with the cluster's TLS credentials (readable by this
 * user only) and follows its state; the object scales, adapts and shows the
 * widget as a `LocalCluster` does.
 */
export function clientCode(cluster: Connectable): string {
  return [
    'import clustermgr_lab',
    'from distributed import Client',
    ...CLOSE_PREVIOUS,
    `cluster = clustermgr_lab.get_cluster(${JSON.stringify(cluster.name)})`,
    'client = Client(cluster)',
    'cluster'
  ].join('\n');
}
