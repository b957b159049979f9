/**
 * Generated from clustermgr_lab/web/openapi.json by openapi-typescript 7.13.0.
 *
 * Do not edit: change the OpenAPI document, then run `jlpm types:generate`.
 * `jlpm types:check` (part of `make lint`) fails while this file is out of date.
 * src/types.ts gives these types the names the rest of src/ uses.
 */

export interface paths {
    "/clustermgr/api/clusters": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** All clusters of this server, in creation order */
        get: operations["listClusters"];
        put?: never;
        /**
         * Create a cluster from a template, or attach one started elsewhere; it starts in the background
         * @description Answers at once with the cluster `pending`; its scheduler and workers start in the background and every change is pushed on the stream. A missing body is an empty object: the default template. `{"attach": "tcp://host:port"}` lists a running scheduler started elsewhere instead (backend `external`, template `attached`): its workers, cores and memory are read from it, its dashboard is proxied, it cannot be scaled (409), and DELETE detaches it without stopping it. Attaching a scheduler that is listed already is a 409.
         */
        post: operations["createCluster"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/clusters/{cluster_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        /** One cluster */
        get: operations["getCluster"];
        put?: never;
        post?: never;
        /**
         * Stop a cluster (detach an external one); it leaves the list once its processes are gone
         * @description Answers at once with the cluster `stopping`. Deleting a cluster that is already stopping is not an error. A cluster of backend `external` (attached or discovered) is only detached: its scheduler and workers keep running.
         */
        delete: operations["deleteCluster"];
        options?: never;
        head?: never;
        /**
         * Make one change: scale, replace the Worker Spec, set adaptive mode, set the idle timeout, or rename
         * @description The body has exactly one key. `scale` sets one group's plan from a target (a manual scale turns adaptive mode off for that group) and the answer says what the target resolved to; `spec` replaces the Worker Spec; `adapt` turns adaptive mode on for one group (or changes its range), or off for all with `null`; `idle_timeout` sets the seconds with no tasks and no client after which the cluster shuts itself down (null: never); `name` renames. Workers start and stop in the background.
         */
        patch: operations["updateCluster"];
        trace?: never;
    };
    "/clustermgr/api/clusters/{cluster_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        /** The cluster's event log: lifecycle changes and scaling decisions, newest last */
        get: operations["listEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/clusters/{cluster_id}/workers": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        /**
         * Each worker of the cluster: name, group, address, host, PID, memory and state
         * @description Workers still running or starting first (by name), then the last 20 that went away (`gone`). `memory` is asked of the scheduler at the time of the request (the last figure it reported where it does not answer). Workers that connected to the scheduler without being started by this server have `group` null.
         */
        get: operations["listWorkers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/clusters/{cluster_id}/logs": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        /**
         * The cluster's logs: the scheduler's, then each worker's, with the worker's state
         * @description Read from the cluster's work folder: the logs of workers that went away, and those of a stopped or failed cluster, stay listed until the cluster is removed (DELETE). A cluster attached from elsewhere has none.
         */
        get: operations["listLogs"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/clusters/{cluster_id}/logs/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
                /** @description A log's name, as `GET clusters/{cluster_id}/logs` lists it (`scheduler`, a worker's name...). Anything else, a path included, is a 404. */
                name: components["parameters"]["LogName"];
            };
            cookie?: never;
        };
        /** The last lines of one log, or what was appended after an offset */
        get: operations["readLog"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/clusters/{cluster_id}/logs/{name}/follow": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
                /** @description A log's name, as `GET clusters/{cluster_id}/logs` lists it (`scheduler`, a worker's name...). Anything else, a path included, is a 404. */
                name: components["parameters"]["LogName"];
            };
            cookie?: never;
        };
        /**
         * WebSocket: the log's last lines, then what is appended to it, as it is written
         * @description Authenticated and origin-checked like `stream`. The server sends JSON text messages: first `{"type": "tail", ...LogChunk}` (the last `tail` lines), then `{"type": "append", ...LogChunk}` whenever the file grew (it looks every 0.5 s; at most 4 MiB a message; nothing more is sent while a message still waits for a client that does not read, and it goes on from there once it reads). `{"type": "error", "code", "message"}` (an unknown cluster or log) or `{"type": "gone"}` (the cluster was removed) is followed by a normal close.
         */
        get: operations["followLog"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/clusters/{cluster_id}/timeline": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        /**
         * The cluster's workers, memory and CPU in use over its whole life, oldest first (the card's chart)
         * @description Sampled from the scheduler every `ClusterManager.timeline_interval` seconds while the cluster runs. Each point is the mean of the samples of a bucket of `resolution` seconds starting at `time`; at most 240 points are kept, and when more would be, neighbours are merged and the resolution doubles. Kept in the server's memory (not across server restarts).
         */
        get: operations["getTimeline"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Core-, GPU- and memory-seconds per UTC day over all clusters this server lists, newest day first
         * @description A worker counts from when it connects to its scheduler until it leaves, with its threads, GPUs and memory limit. Today's amounts run up to the request. Days without use are listed with zeros.
         */
        get: operations["getUsage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/clusters/{cluster_id}/restart": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Start a failed or stopped cluster again: same id, name, Worker Spec, options and adaptive settings
         * @description Answers at once with the cluster `pending`; it starts once what was left of it is stopped, and its history is kept. An attached cluster is attached again at the same address. A cluster that is not failed or stopped, or one discovered in a notebook, is a 409.
         */
        post: operations["restartCluster"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/templates": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The templates a new cluster can start from */
        get: operations["listTemplates"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/stream": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * WebSocket: a snapshot of all clusters, then one message per change
         * @description Open with a WebSocket upgrade (`ws://` or `wss://`), authenticated like every other call (the token as `Authorization` header or `?token=` query parameter, or the login cookie); connections from another origin are refused. The server sends JSON text messages (schema `StreamMessage`) and ignores what the client sends. The first message is a `snapshot` of every cluster; then every change (a cluster added, a status or worker count changed, an adaptive decision, a cluster removed) is pushed as it happens. `seq` grows by one per message: the first change after a snapshot has the snapshot's `seq` + 1. A client that reconnects gets a fresh snapshot. A client that does not read what it is sent is disconnected (close code 1013) once more than `ClusterManager.stream_buffer_limit` bytes wait for it; it reconnects for a fresh snapshot.
         */
        get: operations["stream"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/status": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The health of what the cluster manager depends on: whether its cluster store can be written now
         * @description While `store.writable` is false, creating a cluster and changing one are refused with a 503 (`store_unavailable`) before anything starts; the server tries a write every few seconds and takes requests again once one succeeds. Changes are also pushed on the stream (`type: status`).
         */
        get: operations["getStatus"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/clustermgr/api/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This document, with `servers` set to the server's base URL */
        get: operations["getOpenAPI"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description What went wrong, in words a user can act on. */
        Error: {
            /** @enum {string} */
            code: "invalid" | "not_found" | "conflict" | "forbidden" | "method_not_allowed" | "backend_error" | "scheduler_timeout" | "store_unavailable" | "internal_error" | "http_error";
            message: string;
            /**
             * @description Dotted path of the request field at fault, e.g. `spec.groups[0].memory`
             * @example scale.workers
             * @example spec.groups[0].memory
             * @example adapt.minimum
             * @example template
             */
            field?: string;
        };
        /**
         * @description A number of bytes, or a size string that `dask.utils.parse_bytes` reads ('512 MiB', '4GB', '1TB').
         * @example 1073741824
         * @example 4 GiB
         */
        Size: number | string;
        /** @description A whole number; larger ones are refused. */
        Count: number;
        GroupName: string;
        /**
         * @description `pending`: the scheduler is starting; `running`: every requested worker has connected; `scaling`: workers are starting or stopping; `unresponsive`: the scheduler has not answered a heartbeat for a few seconds (stopped or overloaded; see `error`): workers and resources are as last seen and the plan is not being carried out; `stopping`, `stopped` (a cluster stays listed as `stopped` only when it shut itself down for being idle; DELETE removes it); `failed`: see `error` (e.g. after a server restart, its scheduler was gone).
         * @enum {string}
         */
        ClusterStatus: "pending" | "running" | "scaling" | "unresponsive" | "stopping" | "stopped" | "failed";
        /** @description Custom Dask worker resources each worker advertises (GPUs go in `gpus`). */
        Resources: {
            [key: string]: number;
        };
        /** @description Workers of one kind, as the server describes them. */
        WorkerGroup: {
            name: components["schemas"]["GroupName"];
            /** @description The plan: how many workers this group should have */
            count: number;
            /** @description Threads (cores) per worker */
            threads: number;
            /** @description Memory limit per worker, bytes */
            memory: number;
            /** @description GPUs per worker */
            gpus: number;
            resources: components["schemas"]["Resources"];
        };
        /** @description The desired workers of a cluster, as named groups (none for a cluster of backend `external`: its workers are not this server's). */
        WorkerSpec: {
            groups: components["schemas"]["WorkerGroup"][];
        };
        /** @description A worker group as a request gives it: `name` may be left out when the spec has one group (it is then `default`); `count` defaults to 0, `gpus` to 0. */
        WorkerGroupRequest: {
            name?: components["schemas"]["GroupName"];
            count?: components["schemas"]["Count"];
            threads: number;
            memory: components["schemas"]["Size"];
            /** @description GPUs per worker: at most what a worker's machine has (`ClusterManager.gpus`, detected by default) */
            gpus?: components["schemas"]["Count"];
            resources?: components["schemas"]["Resources"];
        };
        /** @description A Worker Spec as a request gives it. Group names must be unique, and all groups together may ask for at most `ClusterManager.max_workers` workers. */
        WorkerSpecRequest: {
            groups: components["schemas"]["WorkerGroupRequest"][];
        };
        /** @description A scale target: a number of workers, of cores (rounded up to whole workers) or of bytes (likewise), for `group` (required when the cluster has several groups). */
        Target: {
            workers: components["schemas"]["Count"];
            group?: string | null;
        } | {
            cores: components["schemas"]["Count"];
            group?: string | null;
        } | {
            memory: components["schemas"]["Size"];
            group?: string | null;
        };
        /** @description What a scale target resolved to: whole workers of one group and what they add up to. */
        Resolution: {
            group: components["schemas"]["GroupName"];
            workers: number;
            cores: number;
            memory: number;
            gpus: number;
        };
        /** @description Adaptive mode for one group (required when the cluster has several): keep it between `minimum` and `maximum` of `unit` (for `memory`, sizes). Ranges set for other groups are kept. `interval`: seconds between decisions; `wait_count`: intervals a lower target must hold before the group shrinks (default 1; only workers with nothing to do are retired, never while tasks wait for a thread); `target_duration`: seconds the queued work should take. */
        Adapt: {
            minimum: components["schemas"]["Size"];
            maximum: components["schemas"]["Size"];
            /**
             * @default workers
             * @enum {string}
             */
            unit?: "workers" | "cores" | "memory";
            group?: string | null;
            interval?: number;
            wait_count?: number;
            target_duration?: number;
            /**
             * @description Optional; see AdaptOff for turning one group off.
             * @constant
             */
            enabled?: true;
        };
        /** @description Turn adaptive mode off for one group (required when the cluster has several); the ranges of other groups stay. A group that is not adaptive is left as it is. */
        AdaptOff: {
            /** @constant */
            enabled: false;
            group?: string | null;
        };
        AdaptRange: {
            group: components["schemas"]["GroupName"];
            minimum: number;
            maximum: number;
            /** @enum {string} */
            unit: "workers" | "cores" | "memory";
        };
        /** @description Adaptive mode as it is on: one range per adaptive group, and the timing. */
        AdaptState: {
            interval: number;
            wait_count: number;
            target_duration: number;
            groups: components["schemas"]["AdaptRange"][];
        };
        /** @description `requested`: workers asked of the backend and not being stopped; `running`: those connected to the scheduler (plus any worker that joined on its own); `pending`: requested, not yet connected; `stopping`: being retired. */
        WorkerCounts: {
            requested: number;
            running: number;
            pending: number;
            pending_reasons: components["schemas"]["PendingReasons"];
            /** @description Pending workers the backend knows a reason for, with their batch job id. */
            waiting: {
                name: string;
                group: components["schemas"]["GroupName"];
                /** @example Resources */
                reason: string;
                job_id: string | null;
            }[];
            stopping: number;
            groups: {
                name: components["schemas"]["GroupName"];
                requested: number;
                running: number;
                pending: number;
                pending_reasons: components["schemas"]["PendingReasons"];
                /** @description Why this group stopped growing, e.g. the batch system's message when it refused a job. Not retried: a manual scale or a spec edit tries again. */
                error: string | null;
            }[];
        };
        /**
         * @description Why pending workers wait, as `{reason: count}`: the batch system's reason for a queued job (SLURM's squeue reason such as `Resources`, `Priority` or `QOSMaxJobsPerUserLimit`; Grid Engine's state such as `qw`), `submitted` before the first status poll, and `starting: <the decision that asked for it>` (e.g. `starting: worker spec edited: default memory 8 GiB → 1 GiB, 2 workers replaced`; plain `starting` when none is known) once the process or job runs but its worker has not connected yet.
         * @example {
         *       "Resources": 2
         *     }
         */
        PendingReasons: {
            [key: string]: number;
        };
        /** @description What the workers connected to the scheduler add up to (memory in bytes). */
        ClusterResources: {
            cores: number;
            memory: number;
            gpus: number;
        };
        /** @description Why a worker went away on its own (not retired by a scale-down). `kind`: `exit` (its process exited with a code), `signal` (killed by a signal, e.g. SIGKILL), `memory-limit` (its nanny killed it for using more than its memory limit; `detail` names the limit), `oom-killer` (killed by the kernel's OOM killer), the batch system's final job states `TIMEOUT` (walltime), `NODE_FAIL`, `OUT_OF_MEMORY`, `CANCELLED` (from outside this server, e.g. `scancel`), `PREEMPTED`, `connection-lost` (the scheduler lost it; nothing else says why) or `unknown`. Batch states come from `sacct` where SLURM keeps accounting, else `scontrol show job` (finished jobs stay listed for `MinJobAge`), else slurmstepd's line in the job's standard error. */
        Cause: {
            /** @enum {unknown} */
            kind: "exit" | "signal" | "memory-limit" | "oom-killer" | "TIMEOUT" | "NODE_FAIL" | "OUT_OF_MEMORY" | "CANCELLED" | "PREEMPTED" | "connection-lost" | "unknown";
            worker: string;
            group: string | null;
            /** @description The reason in words, e.g. `killed by its nanny: memory above 95% of its 512.00 MiB limit` */
            detail: string;
        };
        /** @description One log of a cluster: the scheduler's, or a worker's (a local process's log file, a batch job's standard error, or its output as `<worker>.stdout`, an SSH worker's remote output). */
        LogEntry: {
            /** @description What to ask for in `logs/{name}` */
            name: string;
            /** @description The worker it belongs to; null for the scheduler's */
            worker: string | null;
            group: string | null;
            /** @description The worker's state (`running`, `pending`, `stopping`, `gone` once it went away); for the scheduler's log, the cluster's status */
            state: string;
            /** @description Bytes */
            size: number;
            /** @description Last written, seconds since the epoch */
            modified: number;
        };
        /** @description A piece of a log file: `text` is bytes `start` to `offset` of the file (decoded as UTF-8, bad bytes replaced); `size` is the file's size now. Follow a log by asking again with `?offset=<offset>`. */
        LogChunk: {
            name?: string;
            /**
             * @description Follow mode only
             * @enum {unknown}
             */
            type?: "tail" | "append";
            text: string;
            start: number;
            offset: number;
            size: number;
        };
        /** @description What was used: threads x seconds, GPUs x seconds, bytes of memory limit x seconds. */
        UsageAmounts: {
            core_seconds: number;
            gpu_seconds: number;
            memory_seconds: number;
        };
        /** @description What the connected workers have now, per second of use: cores, GPUs, bytes of memory limit. */
        UsageRate: {
            cores: number;
            gpus: number;
            memory: number;
        };
        /** @description What the cluster has used since it was created (kept across server restarts), as of `as_of` (its last change), and the rate since: the amount now is `core_seconds + rate.cores * (now - as_of)` (likewise for GPUs and memory). Per group; workers that joined without being started here are group `external`. A worker counts while connected to the scheduler; a re-adopted cluster's workers count while no server watched, a cluster that could not be re-adopted up to the last time a server saw it. */
        ClusterUsage: {
            core_seconds?: unknown;
            gpu_seconds?: unknown;
            memory_seconds?: unknown;
            /** Format: date-time */
            as_of: string | null;
            rate: components["schemas"]["UsageRate"];
            groups: ({
                name: string;
                core_seconds?: unknown;
                gpu_seconds?: unknown;
                memory_seconds?: unknown;
                rate: components["schemas"]["UsageRate"];
            } & components["schemas"]["UsageAmounts"])[];
        } & components["schemas"]["UsageAmounts"];
        UsageSummary: {
            days: ({
                /** Format: date */
                date: string;
                core_seconds?: unknown;
                gpu_seconds?: unknown;
                memory_seconds?: unknown;
                clusters: ({
                    id: string;
                    name: string;
                    core_seconds?: unknown;
                    gpu_seconds?: unknown;
                    memory_seconds?: unknown;
                    groups: ({
                        name: string;
                        core_seconds?: unknown;
                        gpu_seconds?: unknown;
                        memory_seconds?: unknown;
                    } & components["schemas"]["UsageAmounts"])[];
                } & components["schemas"]["UsageAmounts"])[];
            } & components["schemas"]["UsageAmounts"])[];
        };
        Timeline: {
            /** @description Seconds each point covers */
            resolution: number;
            points: {
                /**
                 * Format: date-time
                 * @description The start of the point's bucket
                 */
                time: string;
                /** @description Connected workers (mean) */
                workers: number;
                /** @description Bytes of memory the workers' processes use (mean; 0 for a cluster started elsewhere) */
                memory: number;
                /** @description Bytes of memory limit of the connected workers (mean) */
                memory_limit: number;
                /** @description Cores busy, all workers together (mean; 0 for a cluster started elsewhere) */
                cpu: number;
            }[];
        };
        /** @description One worker of a cluster, as the workers view lists it. */
        WorkerEntry: {
            /** @description The worker's name (its group's name and a number), as in its logs and process title */
            name: string;
            /** @description Its Worker Spec group; null for a worker this server did not start */
            group: string | null;
            /** @description Its address at the scheduler (the last one, for a worker that went away); null before it connected */
            address: string | null;
            /** @description The host it connected from */
            host: string | null;
            /** @description The process started for it, where it runs on the server's host; null elsewhere */
            pid: number | null;
            /** @description Bytes of memory in use by its process */
            memory: number | null;
            /** @description Its memory limit in bytes */
            memory_limit: number | null;
            threads: number | null;
            /** @enum {unknown} */
            state: "starting" | "running" | "closing" | "gone";
        };
        /** @description One entry of a cluster's log. `kind`: `lifecycle` (started, stopped, a worker exited...), `scale` (a decision: `before` → `after` workers of `group`, `message` is the reason) or `note` (a decision not to act, and why). A worker that went away on its own gives a `lifecycle` event with a `cause`. */
        Event: {
            /** Format: date-time */
            time: string;
            /** @enum {string} */
            kind: "lifecycle" | "scale" | "note";
            message: string;
            group: string | null;
            before: number | null;
            after: number | null;
            /** @enum {unknown} */
            source: "manual" | "adaptive" | "spec" | "system" | null;
            /** @description Only on worker-departure events: why the worker went away. */
            cause?: components["schemas"]["Cause"];
            /** @description What was asked, as the user said it (`4 GiB`, `64 cores`, `3 workers`, `spec edited: default memory 8 GiB → 1 GiB`); absent or null when nobody asked (adaptive mode, the system). */
            asked?: string | null;
            /** @description How many times in a row this event happened (absent: once). An event like the previous one of its cluster (same kind, message, group and source) is counted into it, and its `time` is the latest. */
            count?: number;
            /**
             * @description `warning` only for a condition a user must act on (a failed start, a worker that keeps dying, a template unavailable); absent: `info`.
             * @enum {unknown}
             */
            level?: "info" | "warning";
        };
        /** @description What clusters of a backend can do; clients read these, never the backend's name. */
        Capabilities: {
            /** @description Scaling, adaptive mode and spec edits are possible (else refused with a 409) */
            can_scale: boolean;
            /** @description Deleting it stops its processes (else it only detaches) */
            can_stop: boolean;
            /** @description Its Worker Spec may have more than one group */
            multiple_groups: boolean;
            /** @description It survives a server restart (stored, then re-adopted) */
            readoptable: boolean;
            /** @description Its processes run on the server's host */
            runs_processes_here: boolean;
            /** @description When shrinking, exactly the workers the scheduler picks are stopped (else the backend picks which ones close, after the scheduler has retired the ones it would close) */
            exact_retire: boolean;
            /** @description Its Worker Spec may be edited (PATCH spec; else a 409, and a new cluster's spec may only change the count of the template's one group) */
            editable_spec: boolean;
            /** @description The server's TLS credentials are applied to its scheduler and workers (else the backend's own settings decide) */
            enforces_tls: boolean;
            /** @description Why a capability is off, by capability name (e.g. `editable_spec`): shown with the greyed-out action */
            reasons: {
                [key: string]: string;
            };
        };
        /** @description A cluster's TLS files (PEM): its CA certificate, and the certificate and private key that scheduler, workers and clients present. Files of the server's user (0600 in a 0700 folder): a Client of that user builds `distributed.Security(tls_ca_file=ca_file, tls_client_cert=cert, tls_client_key=key, require_encryption=True)` from them (`clustermgr_lab.connect(name)` does); anyone else is refused at the TLS handshake. */
        TLSFiles: {
            ca_file: string;
            cert: string;
            key: string;
        };
        /** @description The fields of a cluster; `Cluster` allows no others. */
        ClusterFields: {
            id: string;
            name: string;
            /** @description The template it was made from; `attached` or `discovered` (a notebook's cluster) for backend `external` */
            template: string;
            /** @description `local`, `slurm`..., `cluster-class` (any distributed Cluster class, e.g. dask_jobqueue.SLURMCluster, scaled by count; see its capabilities), or `external` for a cluster started elsewhere, which this server observes but never scales or stops */
            backend: string;
            capabilities: components["schemas"]["Capabilities"];
            status: components["schemas"]["ClusterStatus"];
            /** @description What went wrong, when `failed` (or the last scaling failure) */
            error: string | null;
            /** @description How a `stopped` cluster ended by itself, normally (no error): e.g. its idle timeout, or a discovered cluster closed in its notebook (`closed in its notebook x.ipynb: its scheduler shut down normally`); a scheduler that vanished instead makes the cluster `failed`, with `error` saying why. Null otherwise */
            ended?: string | null;
            /**
             * @description The scheduler's comm address, once it runs
             * @example tls://127.0.0.1:40123
             */
            scheduler_address: string | null;
            /** @description Where its TLS credentials are; null: plain TCP (its template has `tls: false`, or it was started elsewhere without TLS) */
            tls: components["schemas"]["TLSFiles"] | null;
            /** @description Path of the scheduler's dashboard through this server (`clustermgr/dashboard/{id}/key-{key}/status`, GET only, sandboxed; the key in it lets the page's own requests in without a cookie; other pages are below the same base), while its scheduler runs; null once it failed or stopped */
            dashboard_url: string | null;
            spec: components["schemas"]["WorkerSpec"];
            workers: components["schemas"]["WorkerCounts"];
            resources: components["schemas"]["ClusterResources"];
            adapt: components["schemas"]["AdaptState"] | null;
            /** @description The template's user options as this cluster was created with them (defaults included) */
            options: {
                [key: string]: components["schemas"]["OptionValue"];
            };
            idle_timeout: components["schemas"]["IdleTimeout"];
            last_decision: components["schemas"]["Event"] | null;
            /** @description The latest worker-departure event (with its `cause`), or null: why a worker last went away. */
            last_departure?: components["schemas"]["Event"] | null;
            /** Format: date-time */
            created: string;
            usage: components["schemas"]["ClusterUsage"];
        };
        /** @description A cluster as the server describes it. */
        Cluster: components["schemas"]["ClusterFields"];
        /** @description A cluster after a PATCH; after a `scale`, `resolved` says what the target resolved to. */
        ClusterChange: components["schemas"]["ClusterFields"];
        /** @description A new cluster. `template` defaults to the server's default template; `spec` and `adapt` replace the template's (`adapt: null` turns its adaptive mode off); `name` defaults to `Cluster N`; `idle_timeout` defaults to the template's; `options` sets the template's user options (`Template.user_options`), and a bad value is a 400 whose `field` is `options.<name>`. */
        ClusterCreate: {
            template?: string | null;
            name?: string | null;
            spec?: components["schemas"]["WorkerSpecRequest"] | null;
            adapt?: components["schemas"]["Adapt"] | null;
            idle_timeout?: components["schemas"]["IdleTimeout"];
            options?: {
                [key: string]: components["schemas"]["OptionValue"];
            } | null;
        };
        /** @description A running scheduler started elsewhere, to list (backend `external`). `name` defaults to `Attached host:port`. */
        ClusterAttach: {
            /**
             * @description The scheduler's comm address: tcp://, or tls:// with `tls`
             * @example tcp://127.0.0.1:8786
             * @example tls://127.0.0.1:8786
             */
            attach: string;
            name?: string | null;
            /** @description For a tls:// scheduler (required there, refused for tcp://): the CA certificate, certificate and key its Client presents; absolute paths of files the server's user can read. Its dashboard is proxied over plain HTTP, as distributed serves it by default */
            tls?: components["schemas"]["TLSFiles"] | null;
        };
        /**
         * @description Seconds (at least 1) with no tasks and no client connected after which the cluster shuts itself down (its scheduler enforces it, also while no Jupyter server runs); the cluster then ends `stopped` with an event saying why. null: never.
         * @example 1800
         */
        IdleTimeout: number | null;
        /** @description Exactly one change. */
        ClusterPatch: {
            scale: components["schemas"]["Target"];
        } | {
            spec: components["schemas"]["WorkerSpecRequest"];
        } | {
            adapt: components["schemas"]["Adapt"] | components["schemas"]["AdaptOff"] | null;
        } | {
            name: string;
        } | {
            idle_timeout: components["schemas"]["IdleTimeout"];
        };
        /** @description A named starting point for a new cluster: backend, Worker Spec and, optionally, adaptive mode. */
        Template: {
            name: string;
            /** @description Whether its backend can work on this server now (e.g. false when the batch system's commands are missing or its controller does not answer). */
            available: boolean;
            /** @description Why it is not available, or null. */
            unavailable_reason: string | null;
            description: string;
            backend: string;
            capabilities: components["schemas"]["Capabilities"];
            spec: components["schemas"]["WorkerSpec"];
            adapt: components["schemas"]["Adapt"] | null;
            idle_timeout: components["schemas"]["IdleTimeout"];
            user_options: components["schemas"]["UserOption"][];
            /** @description Its clusters require TLS with credentials of their own (the default); false (set by the site): plain TCP, with a warning in each cluster's events */
            tls: boolean;
        };
        OptionValue: string | number | boolean;
        /** @description An option of the template's backend that a user may set in a create request (`options`): its type, default, and choices or bounds. */
        UserOption: {
            /** @example walltime */
            name: string;
            /** @enum {unknown} */
            type: "string" | "integer" | "number" | "boolean";
            default: components["schemas"]["OptionValue"];
            label: string;
            description: string;
            choices: components["schemas"]["OptionValue"][] | null;
            minimum: number | null;
            maximum: number | null;
        };
        /** @description The first message on every connection: every cluster, and the server's status, as of `seq`. */
        StreamSnapshot: {
            /** @constant */
            type: "snapshot";
            seq: number;
            clusters: components["schemas"]["Cluster"][];
            status?: components["schemas"]["ServerStatus"];
        };
        /** @description A cluster was added, or something about it changed; `cluster` is its whole new state. */
        StreamClusterMessage: {
            /** @enum {unknown} */
            type: "added" | "changed";
            seq: number;
            cluster: components["schemas"]["Cluster"];
            /** @description The cluster's events since its previous message, oldest first (absent when there are none). */
            events?: components["schemas"]["Event"][];
        };
        /** @description A cluster has stopped and left the list. */
        StreamRemoved: {
            /** @constant */
            type: "removed";
            seq: number;
            id: string;
        };
        ServerStatus: {
            /** @description The cluster store (`ClusterManager.store_path`) */
            store: {
                /** @description False while a write fails: new clusters and changes are refused (503) */
                writable: boolean;
                /** @description Why it cannot be written, naming the file */
                error: string | null;
            };
        };
        /** @description The server's status changed (e.g. its store can no longer, or again, be written). */
        StreamStatus: {
            /** @constant */
            type: "status";
            seq: number;
            status: components["schemas"]["ServerStatus"];
        };
        /** @description One WebSocket message. `seq` grows by one per message. */
        StreamMessage: components["schemas"]["StreamSnapshot"] | components["schemas"]["StreamClusterMessage"] | components["schemas"]["StreamRemoved"] | components["schemas"]["StreamStatus"];
    };
    responses: {
        /** @description Invalid body or field; `field` names it when there is one */
        Invalid: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Not authenticated, not authorized (the authorizer refused the action on resource `clustermgr`), a missing XSRF token on a cookie-authenticated change, or a cross-origin WebSocket */
        Forbidden: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description No cluster with this id */
        NotFound: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The cluster store cannot be written now (disk full, read-only, deleted): nothing was started or changed; `GET clustermgr/api/status` says when it can again */
        StoreUnavailable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Valid, but not possible in the cluster's (or the server's) current state, e.g. scaling a cluster that is stopping or that was started elsewhere (backend `external`), attaching a scheduler listed already, or one cluster more than `ClusterManager.max_clusters` */
        Conflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
    };
    parameters: {
        /** @description The cluster's `id` */
        ClusterId: string;
        /** @description A log's name, as `GET clusters/{cluster_id}/logs` lists it (`scheduler`, a worker's name...). Anything else, a path included, is a 404. */
        LogName: string;
    };
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    listClusters: {
        parameters: {
            query?: never;
            header?: {
                /** @description The ETag of a list answered before: 304, with no body, while no cluster has changed since. */
                "If-None-Match"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The clusters */
            200: {
                headers: {
                    /** @description Changes whenever a cluster of the list changes. */
                    ETag?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        clusters: components["schemas"]["Cluster"][];
                    };
                };
            };
            /** @description Not modified: the list is still the one of the If-None-Match ETag (no body). */
            304: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            403: components["responses"]["Forbidden"];
        };
    };
    createCluster: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ClusterCreate"] | components["schemas"]["ClusterAttach"];
            };
        };
        responses: {
            /** @description Accepted: the cluster, `pending` */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Cluster"];
                };
            };
            400: components["responses"]["Invalid"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            503: components["responses"]["StoreUnavailable"];
        };
    };
    getCluster: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The cluster */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Cluster"];
                };
            };
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
        };
    };
    deleteCluster: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Accepted: the cluster, `stopping` */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Cluster"];
                };
            };
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
        };
    };
    updateCluster: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ClusterPatch"];
            };
        };
        responses: {
            /** @description The cluster after the change (with `resolved` for a scale) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClusterChange"];
                };
            };
            400: components["responses"]["Invalid"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            503: components["responses"]["StoreUnavailable"];
        };
    };
    listEvents: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The events */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        events: components["schemas"]["Event"][];
                    };
                };
            };
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
        };
    };
    listWorkers: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The workers */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        workers: components["schemas"]["WorkerEntry"][];
                    };
                };
            };
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
        };
    };
    listLogs: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The logs */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        logs: components["schemas"]["LogEntry"][];
                    };
                };
            };
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
        };
    };
    readLog: {
        parameters: {
            query?: {
                /** @description How many lines from the end (1 to 100000; default 200). The file is read backwards from its end, never whole; one reply carries at most 4 MiB. */
                tail?: number;
                /** @description Instead of the tail: the bytes from this offset on (at most 4 MiB, cut after a whole line); a file now shorter than the offset (rotated) is read from its start. */
                offset?: number;
            };
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
                /** @description A log's name, as `GET clusters/{cluster_id}/logs` lists it (`scheduler`, a worker's name...). Anything else, a path included, is a 404. */
                name: components["parameters"]["LogName"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The text */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LogChunk"];
                };
            };
            400: components["responses"]["Invalid"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
        };
    };
    followLog: {
        parameters: {
            query?: {
                /** @description How many lines from the end (1 to 100000; default 200). The file is read backwards from its end, never whole; one reply carries at most 4 MiB. */
                tail?: number;
            };
            header: {
                Upgrade: "websocket";
            };
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
                /** @description A log's name, as `GET clusters/{cluster_id}/logs` lists it (`scheduler`, a worker's name...). Anything else, a path included, is a 404. */
                name: components["parameters"]["LogName"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Switching protocols; the server then sends `LogChunk`s */
            101: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LogChunk"];
                };
            };
            /** @description Not a WebSocket upgrade request */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            403: components["responses"]["Forbidden"];
        };
    };
    getTimeline: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The timeline */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Timeline"];
                };
            };
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
        };
    };
    getUsage: {
        parameters: {
            query?: {
                /** @description How many days back, today included (1 to 400; default 7) */
                days?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The days */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UsageSummary"];
                };
            };
            400: components["responses"]["Invalid"];
            403: components["responses"]["Forbidden"];
        };
    };
    restartCluster: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The cluster's `id` */
                cluster_id: components["parameters"]["ClusterId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Accepted: the cluster, `pending` */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Cluster"];
                };
            };
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            503: components["responses"]["StoreUnavailable"];
        };
    };
    listTemplates: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The templates */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        templates: components["schemas"]["Template"][];
                        /** @description What a plan is checked against: the per-cluster worker limit, and the size of the machine local workers run on */
                        limits?: {
                            /** @description Most workers one cluster may have, all groups together */
                            max_workers: number;
                            /** @description Most clusters the server lists at once (attached and discovered ones included) */
                            max_clusters: number;
                            machine: {
                                /** @description CPU cores available to this server */
                                cores: number;
                                /** @description Memory available to this server, in bytes */
                                memory: number;
                            };
                        };
                    };
                };
            };
            403: components["responses"]["Forbidden"];
        };
    };
    stream: {
        parameters: {
            query?: never;
            header: {
                Upgrade: "websocket";
                /** @description When sent, must be this server's own origin (or one allowed by `ServerApp.allow_origin` / `allow_origin_pat`). */
                Origin?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Switching protocols; the server then sends `StreamMessage`s */
            101: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StreamMessage"];
                };
            };
            /** @description Not a WebSocket upgrade request (plain-text body) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            403: components["responses"]["Forbidden"];
        };
    };
    getStatus: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The status */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ServerStatus"];
                };
            };
            403: components["responses"]["Forbidden"];
        };
    };
    getOpenAPI: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description An OpenAPI 3.1 document */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        openapi: string;
                    };
                };
            };
            403: components["responses"]["Forbidden"];
        };
    };
}
