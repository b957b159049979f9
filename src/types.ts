/**
 * Types of the clustermgr REST and WebSocket API (see docs/api.md).
 *
 * The request and response shapes are those of the OpenAPI document
 * (clustermgr_lab/web/openapi.json), generated into `api.generated.ts` by
 * `jlpm types:generate`: change the document, never restate a shape here.
 * This file gives them the names the rest of src/ uses, and adds the few
 * types that only the sidebar knows.
 *
 * Sizes are numbers of bytes; the server never sends preformatted strings.
 */
import type { components, operations } from './api.generated';

type Schemas = components['schemas'];

/** The JSON body of an operation's 200 answer. */
type JsonOk<Operation> = Operation extends {
  responses: { 200: { content: { 'application/json': infer Body } } };
}
  ? Body
  : never;

/**
 * The life-cycle state of a cluster.
 */
export type ClusterStatus = Schemas['ClusterStatus'];

/**
 * One group of identical workers in a worker spec.
 */
export type IWorkerGroupSpec = Schemas['WorkerGroup'];

/**
 * The desired shape of a cluster's workers.
 */
export type IWorkerSpec = Schemas['WorkerSpec'];

/**
 * Worker counts of a cluster.
 */
export type IWorkerCounts = Schemas['WorkerCounts'];

/**
 * Worker counts of one group.
 */
export type IWorkerGroupCounts = IWorkerCounts['groups'][number];

/**
 * A pending worker the backend knows a reason for.
 */
export type IWaitingWorker = IWorkerCounts['waiting'][number];

/**
 * Resources of the workers connected to the scheduler.
 */
export type IResources = Schemas['ClusterResources'];

/**
 * The unit adaptive scaling counts in.
 */
export type AdaptUnit = Schemas['AdaptRange']['unit'];

/**
 * A size: bytes, or a string such as `4 GiB` the server parses.
 */
export type Size = Schemas['Size'];

/**
 * Adaptive mode for one group, as a request (PATCH or POST) gives it.
 */
export type IAdaptRequest = Schemas['Adapt'];

/**
 * Turns adaptive mode off for one group (the only one when `group` is left out).
 */
export type IAdaptOffRequest = Schemas['AdaptOff'];

/**
 * The adaptive range of one group, as the server reports it
 * (`memory` in bytes).
 */
export type IAdaptRange = Schemas['AdaptRange'];

/**
 * Adaptive mode as it is on: one range per adaptive group.
 */
export type IAdaptState = Schemas['AdaptState'];

/**
 * One entry of a cluster's log; `last_decision` is the latest scaling one.
 */
export type IEvent = Schemas['Event'] & {
  /** What was asked, in the words it was asked in (e.g. "4 GiB"); null when nothing was. */
  asked?: string | null;
  /** How many times this note came in a row (absent: once). */
  count?: number;
  /** `warning` only for what a user must act on (absent: `info`). */
  level?: 'info' | 'warning';
};

/**
 * One worker of a cluster (`GET clusters/{id}/workers`): name, group,
 * address, host, PID (where local), memory and memory limit, state.
 */
export type IWorkerInfo = Schemas['WorkerEntry'];

/**
 * The answer of `GET clusters/{id}/workers`.
 */
export interface IWorkerList {
  workers: IWorkerInfo[];
}

/**
 * Why a worker went away on its own (not retired by a scale-down).
 */
export type ICause = Schemas['Cause'];

/** The cause of an event, as the bad-news notifications read it. */
export type IEventCause = ICause;

/**
 * `GET clusters/{id}/events`.
 */
export type IEventList = JsonOk<operations['listEvents']>;

/**
 * One log of a cluster (`GET clusters/{id}/logs`).
 */
export type ILogEntry = Schemas['LogEntry'];

/**
 * `GET clusters/{id}/logs`.
 */
export type ILogList = JsonOk<operations['listLogs']>;

/**
 * A piece of a log: bytes `start` to `offset` of the file
 * (`GET clusters/{id}/logs/{name}`).
 */
export type ILogChunk = Schemas['LogChunk'];

/**
 * A message of the `clusters/{id}/logs/{name}/follow` WebSocket: the tail,
 * then what is appended; an error, or `gone`, before the server closes it.
 * (The OpenAPI document gives the `error` and `gone` messages in words only.)
 */
export type LogFollowMessage =
  | (ILogChunk & { type: 'tail' | 'append' })
  | ({ type: 'error' } & IErrorBody)
  | { type: 'gone' };

/**
 * What a cluster's backend allows (the same for every cluster of a template).
 * The sidebar reads these, never backend names.
 */
export type ICapabilities = Schemas['Capabilities'];

/**
 * A cluster as the server describes it.
 */
export type ICluster = Schemas['Cluster'];

/**
 * Core-, GPU- and memory-seconds (bytes of memory limit x seconds).
 */
export type IUsageAmounts = Schemas['UsageAmounts'];

/**
 * What the connected workers have, per second of use.
 */
export type IUsageRate = Schemas['UsageRate'];

/**
 * A cluster's usage as of its last change (`as_of`), and the rate since:
 * the amount now is `core_seconds + rate.cores * (now - as_of)`.
 */
export type IUsage = Schemas['ClusterUsage'];

/**
 * `GET clusters/{id}/timeline`: workers, memory and CPU over the cluster's life.
 */
export type ITimeline = Schemas['Timeline'];

/**
 * One point of a cluster's timeline: the means over `resolution` seconds from `time`.
 */
export type ITimelinePoint = ITimeline['points'][number];

/**
 * A scaling target: one of workers, cores or memory, optionally for one group.
 */
export type Target = Schemas['Target'];

/**
 * The value of a template option.
 */
export type OptionValue = Schemas['OptionValue'];

/**
 * An option of a template's backend that a user may set at creation.
 */
export type IUserOption = Schemas['UserOption'];

/**
 * A cluster template offered by the server.
 */
export type ITemplate = Schemas['Template'];

/**
 * What a scale target resolved to: whole workers of one group.
 */
export type IResolution = Schemas['Resolution'];

/**
 * A cluster after a PATCH; after a `scale`, `resolved` is set.
 *
 * `resolved` is spelled out: the document's `ClusterChange` adds it next to
 * a `$ref`, which openapi-typescript leaves out.
 */
export type IClusterChange = Schemas['ClusterChange'] & {
  resolved?: IResolution;
};

/**
 * A worker group as a request gives it (`memory` may be a size string).
 */
export type IWorkerGroupRequest = Schemas['WorkerGroupRequest'];

/**
 * A Worker Spec as a request gives it.
 */
export type IWorkerSpecRequest = Schemas['WorkerSpecRequest'];

/**
 * The body of `POST clustermgr/api/clusters`. All fields are optional;
 * `{}` uses the default template.
 */
export type ICreateClusterRequest = Schemas['ClusterCreate'];

/**
 * The body of `POST clustermgr/api/clusters` that attaches a running cluster
 * started elsewhere (backend `external`).
 */
export type IAttachClusterRequest = Schemas['ClusterAttach'];

/**
 * The body of `PATCH clustermgr/api/clusters/{id}`: exactly one field.
 */
export type PatchClusterRequest = Schemas['ClusterPatch'];

/**
 * `GET clustermgr/api/clusters`.
 */
export type IClusterList = JsonOk<operations['listClusters']>;

/**
 * `GET clustermgr/api/templates`.
 */
export type ITemplateList = JsonOk<operations['listTemplates']>;

/**
 * What a plan is checked against: the server's worker limit per cluster and
 * the size of the machine local workers run on (`memory` in bytes), as
 * `GET clustermgr/api/templates` gives them.
 */
export type IServerLimits = NonNullable<ITemplateList['limits']>;

/**
 * The server's limits, and what the other live clusters whose workers run
 * on this machine use now (added by the sidebar, not the server): the
 * machine's warnings count it.
 */
export type ILimits = IServerLimits & { in_use_here?: IInUseHere };

/**
 * The JSON body of an error answer.
 */
export type IErrorBody = Schemas['Error'];

/**
 * The server's own condition (`GET clustermgr/api/status`, and the stream's
 * snapshot and `status` messages): whether its store can record clusters.
 */
export type IServerStatus = Schemas['ServerStatus'];

/**
 * Messages on the `clustermgr/api/stream` WebSocket.
 */
export type StreamMessage = Schemas['StreamMessage'];

/**
 * Cores and memory (bytes) the workers of `clusters` other live clusters use
 * on this machine (the sidebar's own sum, not an API shape).
 */
export interface IInUseHere {
  clusters: number;
  cores: number;
  memory: number;
}
