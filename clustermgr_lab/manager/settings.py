"""The manager's settings: every ``c.ClusterManager.*`` option, checked at start, and the templates they make."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir, jupyter_runtime_dir
from traitlets import Bool, Dict, Enum, Float, Int, List, Type, Unicode, default
from traitlets.config import LoggingConfigurable

from clustermgr_lab.backends import BACKENDS
from clustermgr_lab.domain.adaptive import AdaptivePolicy
from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.templates import Template, builtin_templates, labextension_template, parse_template

#: Where the policies were before the package had one folder per layer: a site's config may still name them so.
MOVED_POLICIES = {"clustermgr_lab.adaptive.": "clustermgr_lab.domain.adaptive."}


class PolicyType(Type):
    """A policy class by its import path; the paths of the package's own policies before they moved still work."""

    def _resolve_string(self, string: str):
        for old, new in MOVED_POLICIES.items():
            if string.startswith(old):
                string = new + string[len(old) :]
        return super()._resolve_string(string)


class ClusterManagerSettings(LoggingConfigurable):
    """The options of :class:`~.cluster_manager.ClusterManager` (configured as ``c.ClusterManager.*``)."""

    max_workers = Int(
        32,
        config=True,
        help="Most workers one cluster may have, in all its groups together. Larger plans, "
        "scale targets and adaptive maxima are refused with a 400.",
    )
    max_clusters = Int(
        8,
        config=True,
        help="Most clusters this server lists at once: those it runs (still stopping included) and those "
        "attached or discovered in notebooks.",
    )
    stream_buffer_limit = Int(
        4 * 2**20,
        config=True,
        help="Most bytes of stream messages the server holds for one WebSocket subscriber that does not read "
        "them fast enough; past it the subscriber is disconnected (close code 1013) and gets a fresh snapshot "
        "when it reconnects.",
    )
    max_groups = Int(16, config=True, help="Most worker groups one Worker Spec may have.")
    max_cores = Int(
        1024,
        config=True,
        help="Most cores (threads of all planned workers, all groups together) one cluster may have. "
        "Larger plans, scale targets and adaptive maxima are refused with a 400.",
    )
    max_memory = Unicode(
        "16 TiB",
        config=True,
        help="Most memory (memory limits of all planned workers together) one cluster may have, as a "
        "size dask.utils.parse_bytes reads. Larger plans, scale targets and adaptive maxima are refused with a 400.",
    )
    gpus = Int(
        None,
        allow_none=True,
        config=True,
        help="GPUs one worker can have: those of this machine for the local backend, of a compute node for "
        "batch backends. None (default): the NVIDIA GPUs detected on this machine at start (pynvml, "
        "nvidia-smi or /proc/driver/nvidia). Groups asking a worker for more are refused with a 400.",
    )
    templates = List(
        Dict(),
        config=True,
        help="Extra cluster templates: dicts with name, description, backend and spec "
        "(and optionally adapt, the backend's options, and user_options a user may set in "
        "New Cluster), offered next to the built-in ones. Checked at start; see docs/hpc.md.",
    )
    include_builtin_templates = Bool(True, config=True, help="Offer the built-in 'local' templates.")
    default_template = Unicode("local", config=True, help="Template used when a request names none.")
    labextension_factory = Bool(
        True,
        config=True,
        help="Offer dask-labextension's Cluster factory (labextension.factory in the Dask config, with "
        "labextension.default's workers and adapt) as the template 'labextension' (backend cluster-class), "
        "when the Dask config has one. One that cannot be used is left out, with a warning.",
    )
    start_labextension_initial = Bool(
        True,
        config=True,
        help="Start dask-labextension's labextension.initial clusters (Dask config) with the server, once: "
        "an entry whose name a listed cluster has already (e.g. re-adopted after a restart) is not started again "
        "(a stopped or failed one is restarted). See clustermgr_lab/manager/initial_clusters.py.",
    )
    workdir = Unicode(
        config=True, help="Folder for scheduler files and process logs of the clusters (one folder each)."
    )
    store_path = Unicode(
        config=True,
        help="The SQLite file where clusters are kept, so that a restarted server re-adopts them. "
        "One server uses a store at a time. Default: clustermgr/clusters.sqlite3 in Jupyter's data dir.",
    )
    adaptive_policy = PolicyType(
        AdaptivePolicy,
        klass=AdaptivePolicy,
        config=True,
        help="The policy adaptive mode follows: a class made from a cluster's adaptive settings, whose "
        "propose(spec, load, members) returns new group counts. clustermgr_lab.domain.adaptive.AdaptivePolicy grows at "
        "once and shrinks after wait_count quiet intervals; clustermgr_lab.domain.adaptive.GradualPolicy grows by one "
        "worker per interval.",
    )
    freeze_startup_objects = Bool(
        True,
        config=True,
        help="Once the server has started, leave the objects alive then (modules, classes, the server's state) out "
        "of the garbage collector's full collections (gc.freeze). Such a collection holds the event loop: 166 ms "
        "with 100 clusters on a 2-core machine, 16 ms after this. False: the collector as Python has it.",
    )
    on_shutdown = Enum(
        ["keep", "stop"],
        default_value="keep",
        config=True,
        help="What a clean server stop (e.g. SIGTERM, Ctrl-C) does to the clusters: 'keep' leaves them "
        "running for the next server on the same store to re-adopt; 'stop' stops them all.",
    )

    timeline_interval = Float(
        5.0,
        config=True,
        help="Seconds between two samples of a running cluster's workers, memory and CPU in use (one call to "
        "its scheduler), for the chart of GET clustermgr/api/clusters/{id}/timeline. The timeline covers "
        "the cluster's whole life in at most 240 points, coarser as it grows.",
    )

    @default("workdir")
    def _default_workdir(self) -> str:
        return str(Path(jupyter_runtime_dir()) / "clustermgr")

    @default("store_path")
    def _default_store_path(self) -> str:
        return str(Path(jupyter_data_dir()) / "clustermgr" / "clusters.sqlite3")

    def load_templates(self) -> dict[str, Template]:
        """The templates by name: the built-in ones, the configured ones, dask-labextension's factory.

        Raises
        ------
        ValueError
            Naming the template and the option, when one is not valid (the server does not start).
        """
        builtin = builtin_templates() if self.include_builtin_templates else []
        configured = [(f"builtin_templates[{i}]", t) for i, t in enumerate(builtin)]
        configured += [(f"templates[{i}]", t) for i, t in enumerate(self.templates)]
        templates = {}
        for where, data in configured:
            try:
                template = parse_template(data, BACKENDS, where)
            except InvalidRequest as exc:  # refuse to start, naming the template and the option
                name = data.get("name") if isinstance(data, Mapping) else None
                raise ValueError(f"ClusterManager.templates: template {name!r}: {exc.field}: {exc.message}") from None
            templates[template.name] = template
        for data in labextension_template(self.max_workers) if self.labextension_factory else []:
            if data["name"] in templates:
                self.log.info("labextension.factory: a configured template is called %r already", data["name"])
                continue
            try:
                templates[data["name"]] = parse_template(data, BACKENDS, "labextension.factory")
            except InvalidRequest as exc:  # someone else's config: not a reason to refuse to start
                self.log.warning("labextension.factory is not offered as a template: %s: %s", exc.field, exc.message)
        if self.default_template not in templates:
            raise ValueError(f"ClusterManager.default_template {self.default_template!r} is not a template")
        return templates
