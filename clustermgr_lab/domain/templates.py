"""Cluster templates: named starting points (backend, Worker Spec, adaptive range) for "New Cluster"."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dask.config
import psutil
from dask.utils import parse_bytes

from clustermgr_lab.domain.adaptive import parse_adapt
from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.fields import is_number
from clustermgr_lab.domain.idle import parse_idle_timeout
from clustermgr_lab.domain.options import UserOption, boolean, parse_backend_options, parse_user_options
from clustermgr_lab.domain.spec import WorkerSpec, parse_spec


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    backend: str
    spec: WorkerSpec
    adapt: Mapping[str, Any] | None = None
    idle_timeout: float | None = None  # seconds with no tasks and no client before the cluster shuts down
    options: Mapping[str, Any] = field(default_factory=dict)  # the backend's, as the site set them
    user_options: tuple[UserOption, ...] = ()  # what a user may set at creation
    tls: bool = True  # its clusters require TLS with credentials of their own (False: plain TCP, with a warning)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "backend": self.backend,
            "spec": self.spec.to_dict(),
            "adapt": dict(self.adapt) if self.adapt else None,
            "idle_timeout": self.idle_timeout,
            "user_options": [o.to_dict() for o in self.user_options],
            "tls": self.tls,
        }


def machine_default_group() -> dict[str, Any]:
    """One worker per core, memory shared evenly, leaving a quarter of the machine to the rest.

    The group starts with two workers so that a new cluster can compute at once.
    """
    cores = os.cpu_count() or 1
    memory = psutil.virtual_memory().total
    workers = max(1, cores)
    per_worker = max(256 * 2**20, int(memory * 0.75 / workers) // 2**20 * 2**20)
    return {"name": "default", "count": min(2, workers), "threads": 1, "memory": per_worker, "gpus": 0}


def slurm_template() -> list[dict[str, Any]]:
    """A SLURM template, offered only where ``sbatch`` is on PATH."""
    if shutil.which("sbatch") is None:
        return []
    group = {"name": "default", "count": 2, "threads": 1, "memory": "2 GiB", "gpus": 0}
    description = "Each worker one SLURM job (1 thread, 2 GiB)"
    return [{"name": "slurm", "description": description, "backend": "slurm", "spec": {"groups": [group]}}]


def builtin_templates() -> list[dict[str, Any]]:
    return [
        {
            "name": "local",
            "description": "Local processes sized from this machine: one thread per worker",
            "backend": "local",
            "spec": {"groups": [machine_default_group()]},
        },
        {
            "name": "local-adaptive",
            "description": "Local processes that grow with the load (0 to 4 workers)",
            "backend": "local",
            "spec": {"groups": [{**machine_default_group(), "count": 0}]},
            "adapt": {"minimum": 0, "maximum": 4, "unit": "workers"},
        },
    ] + slurm_template()


def parse_template(data: Mapping[str, Any], backends: Mapping[str, type], field_name: str) -> Template:
    """Validate a template as written in configuration (``ClusterManager.templates``).

    ``backends`` maps backend names to their classes, whose ``template_options`` say which
    ``options`` (and ``user_options``) a template of that backend may give.
    """
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequest("every template needs a name", f"{field_name}.name")
    backend = data.get("backend", "local")
    if backend not in backends:
        raise InvalidRequest(
            f"unknown backend {backend!r}; known: {', '.join(sorted(backends))}", f"{field_name}.backend"
        )
    spec = parse_spec(data.get("spec"), f"{field_name}.spec")
    adapt = data.get("adapt")
    if adapt is not None:
        parse_adapt(adapt, spec, field_name=f"{field_name}.adapt")
    declared = backends[backend].template_options
    options = parse_backend_options(data.get("options"), declared, f"{field_name}.options")
    user_options = parse_user_options(data.get("user_options"), declared, options, f"{field_name}.user_options")
    tls = boolean(data.get("tls", True), f"{field_name}.tls")
    return Template(
        name=name,
        description=str(data.get("description", "")),
        backend=backend,
        spec=spec,
        adapt=adapt,
        idle_timeout=parse_idle_timeout(data.get("idle_timeout"), f"{field_name}.idle_timeout"),
        options=options,
        user_options=user_options,
        tls=tls,
    )


#: The name of the template made from dask-labextension's ``labextension.factory`` (see :func:`labextension_template`).
LABEXTENSION_TEMPLATE = "labextension"


def _class_worker_shape(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Threads and memory of one worker, read from common Cluster class arguments where they say.

    ``threads_per_worker`` / ``memory_limit`` (``LocalCluster``), ``cores`` / ``memory`` / ``processes``
    (dask-jobqueue); otherwise one thread and this machine's default share of memory.
    """
    default = machine_default_group()
    processes = kwargs.get("processes")
    per_job = processes if is_number(processes, integer=True) and processes > 0 else 1
    threads = kwargs.get("threads_per_worker")
    if not is_number(threads, integer=True) or threads < 1:
        cores = kwargs.get("cores")
        ok = is_number(cores, integer=True) and cores >= per_job
        threads = cores // per_job if ok else 1
    memory = default["memory"]
    for key, divisor in (("memory_limit", 1), ("memory", per_job)):
        value = kwargs.get(key)
        try:
            size = parse_bytes(value) if isinstance(value, str) else value
        except ValueError:  # e.g. memory_limit="auto"
            continue
        if is_number(size, finite=False) and size >= divisor:
            memory = int(size // divisor)
            break
    return {"name": "default", "threads": threads, "memory": memory, "gpus": 0}


def labextension_template(max_workers: int) -> list[dict[str, Any]]:
    """dask-labextension's ``labextension.factory`` (Dask config) as a cluster-class template, if configured.

    ``labextension.default.workers`` becomes the count, ``labextension.default.adapt`` the adaptive range
    (in workers, at most ``max_workers``), so that its users move over without rewriting their config.
    """
    factory = dask.config.get("labextension.factory", None)
    if not isinstance(factory, Mapping) or not factory.get("module") or not factory.get("class"):
        return []
    path = f"{factory['module']}.{factory['class']}"
    kwargs = factory.get("kwargs") or {}
    default = dask.config.get("labextension.default", None) or {}
    workers = default.get("workers") if isinstance(default, Mapping) else None
    count = workers if is_number(workers, integer=True) and workers >= 0 else 0
    template: dict[str, Any] = {
        "name": LABEXTENSION_TEMPLATE,
        "description": f"{path} from the Dask config (labextension.factory)",
        "backend": "cluster-class",
        "options": {"class": path, "args": factory.get("args") or [], "kwargs": kwargs},
        "spec": {"groups": [{**_class_worker_shape(kwargs if isinstance(kwargs, Mapping) else {}), "count": count}]},
    }
    adapt = default.get("adapt") if isinstance(default, Mapping) else None
    if isinstance(adapt, Mapping):
        minimum = adapt.get("minimum", 0)
        maximum = adapt.get("maximum", max_workers)
        template["adapt"] = {"minimum": minimum, "maximum": min(maximum, max_workers), "unit": "workers"}
    return [template]
