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
  | 'unresponsive'
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
  /** Why pending workers wait: `{reason: count}` (e.g. SLURM's `Resources`). */
  pending_reasons: { [reason: string]: number };
  /** Why the group stopped growing (e.g. the batch system refused its jobs). */
  error: string | null;
}

/**
 * A pending worker the backend knows a reason for.
 */
export interface IWaitingWorker {
  name: string;
  group: string;
  reason: string;
  job_id: string | null;
}

/**
 * Worker counts of a cluster.
 */
export interface IWorkerCounts {
  requested: number;
  running: number;
  pending: number;
  pending_reasons: { [reason: string]: number };
  waiting: IWaitingWorker[];
  stopping: number;
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
 * A size: bytes, or a string such as `4 GiB` the server parses.
 */
export type Size = number | string;

/**
 * Adaptive mode for one group, as a request (PATCH or POST) gives it.
 */
export interface IAdaptRequest {
  minimum: Size;
  maximum: Size;
  unit?: AdaptUnit;
  group?: string;
  interval?: number;
  wait_count?: number;
  target_duration?: number;
}

/**
 * Turns adaptive mode off for one group (the only one when `group` is left out).
 */
export interface IAdaptOffRequest {
  enabled: false;
  group?: string;
}

/**
 * The adaptive range of one group, as the server reports it
 * (`memory` in bytes).
 */
export interface IAdaptRange {
  group: string;
  minimum: number;
  maximum: number;
  unit: AdaptUnit;
}

/**
 * Adaptive mode as it is on: one range per adaptive group.
 */
export interface IAdaptState {
  interval: number;
  wait_count: number;
  target_duration: number;
  groups: IAdaptRange[];
}

/**
 * One entry of a cluster's log; `last_decision` is the latest scaling one.
 */
export interface IEvent {
  time: string;
  kind: 'lifecycle' | 'scale' | 'note';
  message: string;
  group: string | null;
  before: number | null;
  after: number | null;
  source: 'manual' | 'adaptive' | 'spec' | 'system' | null;
  /** Only on worker-departure events: why the worker went away. */
  cause?: ICause;
}

/**
 * Why a worker went away on its own (not retired by a scale-down).
 */
export interface ICause {
  kind:
    | 'exit'
    | 'signal'
    | 'memory-limit'
    | 'oom-killer'
    | 'TIMEOUT'
    | 'NODE_FAIL'
    | 'OUT_OF_MEMORY'
    | 'CANCELLED'
    | 'PREEMPTED'
    | 'connection-lost'
    | 'unknown';
  worker: string;
  group: string | null;
  /** The reason in words, e.g. "killed by signal 9 (SIGKILL)". */
  detail: string;
}

/**
 * One log of a cluster (`GET clusters/{id}/logs`).
 */
export interface ILogEntry {
  name: string;
  /** The worker it belongs to; null for the scheduler's. */
  worker: string | null;
  group: string | null;
  /** running, pending, stopping, gone (a worker); the cluster's status (the scheduler's). */
  state: string;
  size: number;
  modified: number;
}

/**
 * A piece of a log: bytes `start` to `offset` of the file.
 */
export interface ILogChunk {
  type?: 'tail' | 'append' | 'gone' | 'error';
  text: string;
  start: number;
  offset: number;
  size: number;
  message?: string;
}

/** The cause of an event, as the bad-news notifications read it. */
export type IEventCause = ICause;

/**
 * What a cluster's backend allows (the same for every cluster of a template).
 * The sidebar reads these, never backend names.
 */
export interface ICapabilities {
  /** Scale, adaptive mode and Worker Spec edits are accepted (else refused with 409). */
  can_scale: boolean;
  /** DELETE stops the cluster; when false it only detaches it ("Detach"). */
  can_stop: boolean;
  /** A Worker Spec may have more than one group. */
  multiple_groups: boolean;
  /** The cluster survives a restart of the Jupyter server. */
  readoptable: boolean;
  /** Its scheduler and workers run on the Jupyter server's host. */
  runs_processes_here: boolean;
  /** Shrinking stops exactly the workers the scheduler picks (else the backend picks). */
  exact_retire?: boolean;
  /** Its Worker Spec may be edited; else only the count of its one group changes. */
  editable_spec?: boolean;
  /** The server's TLS credentials are applied to it. */
  enforces_tls?: boolean;
  /** Why a capability is off, by its name: shown with the greyed-out action. */
  reasons?: Record<string, string>;
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
  /**
   * How a stopped cluster ended by itself, normally (its idle timeout, closed
   * in its notebook); null otherwise. Older servers do not send it.
   */
  ended?: string | null;
  scheduler_address: string | null;
  /**
   * Where its TLS files are (readable by the server's user only); null: plain TCP.
   */
  tls?: { ca_file: string; cert: string; key: string } | null;
  dashboard_url: string | null;
  spec: IWorkerSpec;
  workers: IWorkerCounts;
  resources: IResources;
  adapt: IAdaptState | null;
  /** The template's user options as the cluster was created with them. */
  options: { [name: string]: OptionValue };
  /**
   * Seconds with no tasks and no client before the cluster shuts itself down (null: never).
   */
  idle_timeout?: number | null;
  last_decision: IEvent | null;
  /** The latest worker-departure event, with its cause (servers before it: absent). */
  last_departure?: IEvent | null;
  created: string;
  /** What its backend allows (see `capabilitiesOf` for servers that predate it). */
  capabilities?: ICapabilities;
  /** What it has used since it was created (absent from servers that predate it). */
  usage?: IUsage;
}

/**
 * Core-, GPU- and memory-seconds (bytes of memory limit x seconds).
 */
export interface IUsageAmounts {
  core_seconds: number;
  gpu_seconds: number;
  memory_seconds: number;
}

/**
 * What the connected workers have, per second of use.
 */
export interface IUsageRate {
  cores: number;
  gpus: number;
  /** Bytes of memory limit. */
  memory: number;
}

/**
 * A cluster's usage as of its last change (`as_of`), and the rate since:
 * the amount now is `core_seconds + rate.cores * (now - as_of)`.
 */
export interface IUsage extends IUsageAmounts {
  as_of: string | null;
  rate: IUsageRate;
  groups: Array<IUsageAmounts & { name: string; rate: IUsageRate }>;
}

/**
 * One point of a cluster's timeline: the means over `resolution` seconds from `time`.
 */
export interface ITimelinePoint {
  time: string;
  workers: number;
  /** Bytes the workers' processes use. */
  memory: number;
  /** Bytes of memory limit of the connected workers. */
  memory_limit: number;
  /** Cores busy, all workers together. */
  cpu: number;
}

/**
 * `GET clusters/{id}/timeline`: workers, memory and CPU over the cluster's life.
 */
export interface ITimeline {
  resolution: number;
  points: ITimelinePoint[];
}

/**
 * A scaling target: one of workers, cores or memory, optionally for one group.
 */
export type Target = (
  { workers: number } | { cores: number } | { memory: Size }
) & { group?: string };

/**
 * The value of a template option.
 */
export type OptionValue = string | number | boolean;

/**
 * An option of a template's backend that a user may set at creation.
 */
export interface IUserOption {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean';
  default: OptionValue;
  label: string;
  description: string;
  choices: OptionValue[] | null;
  minimum: number | null;
  maximum: number | null;
}

/**
 * A cluster template offered by the server.
 */
export interface ITemplate {
  name: string;
  description: string;
  backend: string;
  spec: IWorkerSpec;
  adapt: IAdaptRequest | null;
  user_options: IUserOption[];
  idle_timeout?: number | null;
  /** What clusters of this template allow. */
  capabilities?: ICapabilities;
  /** Whether its backend can work on this server now (absent: it can). */
  available?: boolean;
  /** Why it cannot, when it cannot. */
  unavailable_reason?: string | null;
}

/**
 * What a scale target resolved to: whole workers of one group.
 */
export interface IResolution {
  group: string;
  workers: number;
  cores: number;
  memory: number;
  gpus: number;
}

/**
 * A cluster after a PATCH; after a `scale`, `resolved` is set.
 */
export interface IClusterChange extends ICluster {
  resolved?: IResolution;
}

/**
 * A worker group as a request gives it (`memory` may be a size string).
 */
export interface IWorkerGroupRequest {
  name?: string;
  count?: number;
  threads: number;
  memory: Size;
  gpus?: number;
  resources?: { [name: string]: number };
}

/**
 * A Worker Spec as a request gives it.
 */
export interface IWorkerSpecRequest {
  groups: IWorkerGroupRequest[];
}

/**
 * The body of `POST clustermgr/api/clusters`. All fields are optional;
 * `{}` uses the default template.
 */
export interface ICreateClusterRequest {
  template?: string;
  name?: string;
  spec?: IWorkerSpecRequest;
  adapt?: IAdaptRequest | null;
  options?: { [name: string]: OptionValue };
}

/**
 * The body of `POST clustermgr/api/clusters` that attaches a running cluster
 * started elsewhere (backend `external`).
 */
export interface IAttachClusterRequest {
  attach: string;
  name?: string;
}

/**
 * The body of `PATCH clustermgr/api/clusters/{id}`: exactly one field.
 */
export type PatchClusterRequest =
  | { scale: Target }
  | { spec: IWorkerSpecRequest }
  | { adapt: IAdaptRequest | IAdaptOffRequest | null }
  | { name: string }
  | { idle_timeout: number | null };

/**
 * `GET clustermgr/api/clusters`.
 */
export interface IClusterList {
  clusters: ICluster[];
}

/**
 * What a plan is checked against: the server's worker limit per cluster and
 * the size of the machine local workers run on (`memory` in bytes).
 */
export interface ILimits {
  max_workers: number;
  max_clusters: number;
  machine: { cores: number; memory: number };
  /**
   * What the other live clusters whose workers run on this machine use now
   * (added by the sidebar, not the server): the machine's warnings count it.
   */
  in_use_here?: IInUseHere;
}

/**
 * `GET clustermgr/api/templates`.
 */
export interface ITemplateList {
  templates: ITemplate[];
  limits?: ILimits;
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
/**
 * The server's own condition (`GET clustermgr/api/status`, and the stream's
 * snapshot and `status` messages): whether its store can record clusters.
 */
export interface IServerStatus {
  store: { writable: boolean; error: string | null };
}

export type StreamMessage =
  | {
      type: 'snapshot';
      seq: number;
      clusters: ICluster[];
      status?: IServerStatus;
    }
  | { type: 'status'; seq: number; status: IServerStatus }
  | {
      type: 'added' | 'changed';
      seq: number;
      cluster: ICluster;
      /** The cluster's events since its previous message (absent: none). */
      events?: IEvent[];
    }
  | { type: 'removed'; seq: number; id: string };

/**
 * Cores and memory (bytes) the workers of `clusters` other live clusters use
 * on this machine.
 */
export interface IInUseHere {
  clusters: number;
  cores: number;
  memory: number;
}
