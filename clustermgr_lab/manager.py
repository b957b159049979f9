"""The cluster manager: the registry of clusters this server owns, its configuration, and change events.

Requests arrive here already decoded from JSON; everything returned is JSON-ready. No tornado.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping

import psutil
from jupyter_core.paths import jupyter_runtime_dir
from traitlets import Bool, Dict, Int, List, Unicode, default
from traitlets.config import LoggingConfigurable

from .adaptive import parse_adapt
from .backends import BACKENDS
from .cluster import FAILED, STOPPED, STOPPING, ManagedCluster
from .errors import Conflict, InvalidRequest, NotFound
from .options import parse_backend_options, resolve_user_options
from .spec import parse_spec, parse_target
from .templates import Template, builtin_templates, parse_template

Listener = Callable[[dict], None]


def _only_fields(body: Any, allowed: set[str], what: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise InvalidRequest(f"the request body must be a JSON object, not {type(body).__name__}", None)
    for key in body:
        if key not in allowed:
            raise InvalidRequest(f"unknown field {key!r} in {what}; expected: {', '.join(sorted(allowed))}", key)
    return body


def _parse_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 80:
        raise InvalidRequest(f"must be a non-empty string of at most 80 characters, not {value!r}", "name")
    return value.strip()


class ClusterManager(LoggingConfigurable):
    """Creates, scales and stops the Dask clusters of this Jupyter server."""

    max_workers = Int(
        32,
        config=True,
        help="Most workers one cluster may have, in all its groups together. Larger plans, "
        "scale targets and adaptive maxima are refused with a 400.",
    )
    max_clusters = Int(8, config=True, help="Most clusters this server runs at once.")
    templates = List(
        Dict(),
        config=True,
        help="Extra cluster templates: dicts with name, description, backend and spec "
        "(and optionally adapt, the backend's options, and user_options a user may set in "
        "New Cluster), offered next to the built-in ones. Checked at start; see docs/hpc.md.",
    )
    include_builtin_templates = Bool(True, config=True, help="Offer the built-in 'local' templates.")
    default_template = Unicode("local", config=True, help="Template used when a request names none.")
    workdir = Unicode(config=True, help="Folder for scheduler files and process logs of the clusters.")

    @default("workdir")
    def _default_workdir(self) -> str:
        return str(Path(jupyter_runtime_dir()) / "clustermgr")

    @property
    def server_workdir(self) -> Path:
        """This server's own part of ``workdir``: one folder per cluster below it."""
        return Path(self.workdir) / f"server-{os.getpid()}"

    def __init__(self, base_url: str = "/", **kwargs):
        super().__init__(**kwargs)
        self.base_url = base_url
        self._clusters: dict[str, ManagedCluster] = {}
        self._tasks: set[asyncio.Task] = set()
        self._listeners: set[Listener] = set()
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self.seq = 0
        self._templates = self._load_templates()
        self.reap_orphans()

    def reap_orphans(self) -> None:
        """Stop processes left behind by servers of this workdir that died without cleaning up."""
        for server_dir in Path(self.workdir).glob("server-*"):
            try:
                pid = int(server_dir.name.split("-", 1)[1])
            except ValueError:
                continue
            if pid == os.getpid() or psutil.pid_exists(pid):
                continue
            for cluster_dir in server_dir.iterdir():
                try:
                    backend = json.loads((cluster_dir / "cluster.json").read_text())["backend"]
                except (OSError, ValueError, KeyError):
                    continue
                if backend in BACKENDS:
                    stopped = BACKENDS[backend].reap(cluster_dir)
                    if stopped:
                        self.log.warning("stopped %s left running by a server that died: %s", cluster_dir.name, stopped)
            shutil.rmtree(server_dir, ignore_errors=True)

    def _load_templates(self) -> dict[str, Template]:
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
        if self.default_template not in templates:
            raise ValueError(f"ClusterManager.default_template {self.default_template!r} is not a template")
        return templates

    # -- reading -------------------------------------------------------------------------------

    def get(self, cluster_id: str) -> ManagedCluster:
        try:
            return self._clusters[cluster_id]
        except KeyError:
            raise NotFound(f"no cluster with id {cluster_id!r}") from None

    def describe(self, cluster: ManagedCluster) -> dict[str, Any]:
        return cluster.to_dict(self.base_url)

    def list(self) -> list[dict[str, Any]]:
        return [self.describe(c) for c in self._clusters.values()]

    def list_templates(self) -> list[dict[str, Any]]:
        return [t.to_dict() for t in self._templates.values()]

    def events(self, cluster_id: str) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.get(cluster_id).events]

    # -- changing --------------------------------------------------------------------------------

    def create(self, body: Any) -> ManagedCluster:
        """Validate, register and start a cluster in the background; returns it ``pending``."""
        body = _only_fields(body, {"template", "name", "spec", "adapt", "options"}, "a new cluster")
        template_name = body.get("template", self.default_template)
        if template_name is None:
            template_name = self.default_template
        if not isinstance(template_name, str) or template_name not in self._templates:
            raise InvalidRequest(
                f"unknown template {template_name!r}; templates are: {', '.join(self._templates)}", "template"
            )
        template = self._templates[template_name]
        spec = template.spec
        if body.get("spec") is not None:
            spec = parse_spec(body["spec"], max_workers=self.max_workers)
        elif spec.total_workers > self.max_workers:
            raise InvalidRequest(f"template asks for more than {self.max_workers} workers", "template")
        adapt_data = body["adapt"] if "adapt" in body else template.adapt
        adapt = parse_adapt(adapt_data, spec, max_workers=self.max_workers) if adapt_data is not None else None
        declared = BACKENDS[template.backend].template_options
        user_values = resolve_user_options(body.get("options"), template.user_options, declared)
        backend_options = {**template.options, **parse_backend_options(user_values, declared, "options")}
        name = _parse_name(body["name"]) if body.get("name") is not None else None
        if name is not None:
            self._require_unique_name(name)
        live = [c for c in self._clusters.values() if c.lifecycle not in (STOPPING, STOPPED, FAILED)]
        if len(live) >= self.max_clusters:
            raise Conflict(f"this server already runs {len(live)} clusters, the most it allows")

        cluster_id = uuid.uuid4().hex[:8]
        workdir = self.server_workdir / cluster_id
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "cluster.json").write_text(json.dumps({"id": cluster_id, "backend": template.backend}))
        backend = BACKENDS[template.backend](cluster_id, workdir, options=backend_options)
        cluster = ManagedCluster(
            cluster_id,
            name or self._next_name(),
            template.name,
            backend,
            spec,
            on_change=self._cluster_changed,
            max_workers=self.max_workers,
        )
        cluster.options = user_values
        if adapt is not None:
            cluster.adapt_to(adapt_data)
        self._clusters[cluster_id] = cluster
        self._emit({"type": "added", "cluster": self.describe(cluster)})
        self._spawn(cluster.start())
        self.log.info("cluster %s (%s) created from template %s", cluster_id, cluster.name, template.name)
        return cluster

    def _next_name(self) -> str:
        taken = {c.name for c in self._clusters.values()}
        n = 1
        while f"Cluster {n}" in taken:
            n += 1
        return f"Cluster {n}"

    def update(self, cluster_id: str, body: Any) -> dict[str, Any]:
        """Apply one change: ``scale``, ``spec``, ``adapt`` or ``name``. Returns extra details."""
        cluster = self.get(cluster_id)
        body = _only_fields(body, {"scale", "spec", "adapt", "name"}, "a cluster change")
        if len(body) != 1:
            raise InvalidRequest("give exactly one of 'scale', 'spec', 'adapt' or 'name'", None)
        (key, value), = body.items()
        if key == "scale":
            resolution = cluster.scale(parse_target(value))
            return {"resolved": resolution.to_dict()}
        if key == "spec":
            cluster.set_spec(parse_spec(value, max_workers=self.max_workers))
        elif key == "adapt":
            cluster.adapt_to(value)
        else:
            name = _parse_name(value)
            if name != cluster.name:
                self._require_unique_name(name)
            cluster.rename(name)
        return {}

    def _require_unique_name(self, name: str) -> None:
        if any(c.name == name for c in self._clusters.values()):
            raise Conflict(f"a cluster called {name!r} exists already", "name")

    def delete(self, cluster_id: str) -> ManagedCluster:
        """Start stopping a cluster; it leaves the list once its processes are gone."""
        cluster = self.get(cluster_id)
        if cluster.lifecycle in (STOPPING, STOPPED):
            return cluster

        async def close_and_forget():
            try:
                await cluster.close()
            finally:
                self._clusters.pop(cluster_id, None)
                self._dirty.discard(cluster_id)
                self._emit({"type": "removed", "id": cluster_id})

        cluster.lifecycle = STOPPING
        self._spawn(close_and_forget())
        return cluster

    async def close_all(self) -> None:
        """Stop every cluster (server shutdown): nothing is left running."""
        await asyncio.gather(*(c.close() for c in list(self._clusters.values())), return_exceptions=True)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._clusters.clear()
        shutil.rmtree(self.server_workdir, ignore_errors=True)

    def _spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- push ------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> dict:
        """Register a listener and return the snapshot it starts from."""
        self._flush()
        self._listeners.add(listener)
        return {"type": "snapshot", "seq": self.seq, "clusters": self.list()}

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    def _cluster_changed(self, cluster: ManagedCluster) -> None:
        # Changes that happen in one turn of the event loop go out as one message per cluster.
        self._dirty.add(cluster.id)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_event_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        for cluster_id in dirty:
            if cluster_id in self._clusters:
                self._emit({"type": "changed", "cluster": self.describe(self._clusters[cluster_id])}, flush=False)

    def _emit(self, message: dict, flush: bool = True) -> None:
        if flush:
            self._flush()
        self.seq += 1
        message = {**message, "seq": self.seq}
        for listener in list(self._listeners):
            try:
                listener(message)
            except Exception:
                self.log.exception("stream listener failed")
