"""Caps on what one cluster may ask for, and the checks of a Worker Spec against them (pure).

A plan is checked as a whole — the spec as it would be after a change — so that a scale target
or an adaptive maximum is refused for the same reasons as a spec that asks for the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from dask.utils import format_bytes

from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.spec import WorkerSpec


@dataclass(frozen=True)
class Limits:
    """What one cluster may have. ``None``: no cap of that kind.

    ``gpus_per_worker`` and ``memory_per_worker`` are what the backend's machines have: a worker
    asking for more could never start (or would be killed for memory), so it is refused.
    ``max_gpus``: GPUs all workers together may have (on one machine, they cannot share them).

    Examples
    --------
    >>> from clustermgr_lab.domain.spec import parse_spec
    >>> spec = parse_spec({"groups": [{"count": 4, "threads": 8, "memory": "1 GiB"}]})
    >>> Limits(max_cores=16).check(spec, "spec.groups")
    Traceback (most recent call last):
    ...
    clustermgr_lab.domain.errors.InvalidRequest: asks for 32 cores in all; the limit is 16 per cluster
    """

    max_cores: int | None = None
    max_memory: int | None = None
    gpus_per_worker: int | None = None
    max_gpus: int | None = None
    memory_per_worker: int | None = None
    where: str = "this server"

    def check(self, spec: WorkerSpec, field_name: str, *, groups_field: str | None = None) -> None:
        """Refuse ``spec`` (naming ``field_name``) when it goes past a cap.

        ``groups_field`` is where the groups themselves are (``spec.groups``) when the request
        gave them; per-group problems are then named per group (``spec.groups[1].gpus``).
        """
        for i, group in enumerate(spec.groups):
            where = f"{groups_field}[{i}]" if groups_field else field_name
            if self.gpus_per_worker is not None and group.gpus > self.gpus_per_worker:
                have = f"{self.gpus_per_worker} GPU{'s' if self.gpus_per_worker != 1 else ''}"
                asks = f"{group.gpus} GPU{'s' if group.gpus != 1 else ''}"
                raise InvalidRequest(
                    f"group {group.name!r} asks for {asks} per worker, but {self.where} has {have}"
                    + ("" if self.gpus_per_worker else "; ask your administrator for a template with GPUs"),
                    f"{where}.gpus" if groups_field else where,
                )
            if self.memory_per_worker is not None and group.memory > self.memory_per_worker:
                raise InvalidRequest(
                    f"group {group.name!r} asks for {format_bytes(group.memory)} per worker; {self.where} has "
                    f"{format_bytes(self.memory_per_worker)} of memory",
                    f"{where}.memory" if groups_field else where,
                )
        cores = sum(g.count * g.threads for g in spec.groups)
        if self.max_cores is not None and cores > self.max_cores:
            raise InvalidRequest(
                f"asks for {cores} cores in all; the limit is {self.max_cores} per cluster", field_name
            )
        gpus = sum(g.count * g.gpus for g in spec.groups)
        if self.max_gpus is not None and gpus > self.max_gpus:
            raise InvalidRequest(f"asks for {gpus} GPUs in all; {self.where} has {self.max_gpus}", field_name)
        memory = sum(g.count * g.memory for g in spec.groups)
        if self.max_memory is not None and memory > self.max_memory:
            raise InvalidRequest(
                f"asks for {format_bytes(memory)} of memory in all; the limit is {format_bytes(self.max_memory)} "
                "per cluster",
                field_name,
            )
