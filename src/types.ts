/**
 * Types of the clustermgr REST and WebSocket API (see docs/api.md).
 *
 * Sizes are numbers of bytes; the server never sends preformatted strings.
 */

/**
 * The life-cycle state of a cluster.
 */
export type ClusterStatus =
  | 'pending'
  | 'running'
  | 'scaling'
  | 'stopping'
  | 'stopped'
  | 'failed';

/**
 * One group of identical workers in a worker spec.
 */
export interface IWorkerGroupSpec {
  name: string;
  count: number;
  threads: number;
  /** Memory per worker in bytes. */
  memory: number;
  gpus: number;
  resources: { [name: string]: number };
}

/**
 * The desired shape of a cluster's workers.
 */
export interface IWorkerSpec {
  groups: IWorkerGroupSpec[];
}

/**
 * Worker counts of one group.
 */
export interface IWorkerGroupCounts {
  name: string;
  requested: number;
  running: number;
  pending: number;
}

/**
 * Worker counts of a cluster.
 */
export interface IWorkerCounts {
  requested: number;
  running: number;
  pending: number;
  groups: IWorkerGroupCounts[];
}

/**
 * Resources of the workers connected to the scheduler.
 */
export interface IResources {
  cores: number;
  /** Total memory in bytes. */
  memory: number;
  gpus: number;
}

/**
 * The unit adaptive scaling counts in.
 */
export type AdaptUnit = 'workers' | 'cores' | 'memory';

/**
 * Adaptive scaling settings.
 */
export interface IAdapt {
  minimum: number;
  maximum: number;
  unit: AdaptUnit;
  group?: string;
  interval?: number;
  wait_count?: number;
}

/**
 * The last scaling decision the manager took.
 */
export interface IDecision {
  time: string;
  group: string;
  before: number;
  after: number;
  reason: string;
}

/**
 * A cluster as the server describes it.
 */
export interface ICluster {
  id: string;
  name: string;
  template: string;
  backend: string;
  status: ClusterStatus;
  error: string | null;
  scheduler_address: string | null;
  dashboard_url: string | null;
  spec: IWorkerSpec;
  workers: IWorkerCounts;
  resources: IResources;
  adapt: IAdapt | null;
  last_decision: IDecision | null;
  created: string;
}

/**
 * A scaling target: one of workers, cores or memory, optionally for one group.
 */
export type Target = (
  | { workers: number }
  | { cores: number }
  | { memory: number | string }
) & { group?: string };

/**
 * A cluster template offered by the server.
 *
 * Only `name` is relied upon; the rest is shown as given.
 */
export interface ITemplate {
  name: string;
  [key: string]: unknown;
}

/**
 * The body of `POST clustermgr/api/clusters`. All fields are optional;
 * `{}` uses the default template.
 */
export interface ICreateClusterRequest {
  template?: string;
  name?: string;
  spec?: IWorkerSpec;
  adapt?: IAdapt;
}

/**
 * The body of `PATCH clustermgr/api/clusters/{id}`: exactly one field.
 */
export type PatchClusterRequest =
  | { scale: Target }
  | { spec: IWorkerSpec }
  | { adapt: IAdapt | null }
  | { name: string };

/**
 * `GET clustermgr/api/clusters`.
 */
export interface IClusterList {
  clusters: ICluster[];
}

/**
 * `GET clustermgr/api/templates`.
 */
export interface ITemplateList {
  templates: ITemplate[];
}

/**
 * The JSON body of an error answer.
 */
export interface IErrorBody {
  code: string;
  message: string;
  field?: string;
}

/**
 * Messages on the `clustermgr/api/stream` WebSocket.
 */
export type StreamMessage =
  | { type: 'snapshot'; seq: number; clusters: ICluster[] }
  | { type: 'added' | 'changed'; seq: number; cluster: ICluster }
  | { type: 'removed'; seq: number; id: string };
