"""Worker Specs and scale targets: parsing, validation and resolution into worker counts.

Pure domain logic: no tornado, no distributed, no I/O.

A :class:`WorkerSpec` declares the desired state of a cluster as named worker groups; the
``count`` of each group is the *plan* that :mod:`clustermgr_lab.cluster.managed` reconciles.

Examples
--------
>>> spec = parse_spec({"groups": [{"name": "default", "count": 0, "threads": 1,
...                                "memory": "256 MiB"}]})
>>> target = parse_target({"memory": "1GiB"})
>>> resolve_target(spec, target).workers
4
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dask.utils import format_bytes, parse_bytes

from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.fields import check_number, field_path, is_number, reject_unknown_fields

GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
RESOURCE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,39}$")
GPU_RESOURCE = "GPU"
# Past these, numbers stop meaning anything (and int/float conversions overflow): refused with a 400.
LARGEST_COUNT = 2**31 - 1
LARGEST_SIZE = 2**63 - 1  # 8 EiB
LARGEST_RESOURCE = 2**53


@dataclass(frozen=True)
class WorkerGroup:
    """Workers of one kind: each has ``threads`` cores, ``memory`` bytes and ``gpus`` GPUs."""

    name: str
    count: int
    threads: int
    memory: int
    gpus: int = 0
    resources: Mapping[str, float] = field(default_factory=dict)

    @property
    def worker_resources(self) -> dict[str, float]:
        """Dask worker resources each worker advertises (``GPU`` included)."""
        advertised = dict(self.resources)
        if self.gpus:
            advertised[GPU_RESOURCE] = self.gpus
        return advertised

    @property
    def is_general(self) -> bool:
        """True when the group advertises no resources: any unrestricted task fits it."""
        return not self.worker_resources

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "count": self.count,
            "threads": self.threads,
            "memory": self.memory,
            "gpus": self.gpus,
            "resources": dict(self.resources),
        }


@dataclass(frozen=True)
class WorkerSpec:
    """The worker groups of a cluster, in order."""

    groups: tuple[WorkerGroup, ...]

    def group(self, name: str | None, field_name: str = "group") -> WorkerGroup:
        """The group called ``name``; the only group when ``name`` is None and there is one."""
        if name is None:
            if len(self.groups) == 1:
                return self.groups[0]
            names = ", ".join(g.name for g in self.groups)
            raise InvalidRequest(
                f"this cluster has several worker groups ({names}): name one in 'group'",
                field_name,
            )
        for group in self.groups:
            if group.name == name:
                return group
        names = ", ".join(g.name for g in self.groups)
        raise InvalidRequest(f"unknown group {_shown(name)}; groups are: {names}", field_name)

    def with_count(self, name: str, count: int) -> WorkerSpec:
        return WorkerSpec(tuple(replace(g, count=count) if g.name == name else g for g in self.groups))

    @property
    def total_workers(self) -> int:
        return sum(g.count for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [g.to_dict() for g in self.groups]}


@dataclass(frozen=True)
class ScaleTarget:
    """What a user asked for: a number of workers, cores or bytes, for one group or the only one."""

    unit: str  # "workers" | "cores" | "memory"
    amount: int
    group: str | None = None


@dataclass(frozen=True)
class Resolution:
    """What a target resolved to for one group: whole workers and what they add up to.

    ``asked`` is the target as the user said it, ``reason`` the decision in words (see :func:`scale_wording`).
    """

    group: str
    workers: int
    cores: int
    memory: int
    gpus: int
    asked: str | None = field(default=None, compare=False)
    reason: str = field(default="manual scale", compare=False)

    @classmethod
    def of(cls, group: WorkerGroup, workers: int) -> Resolution:
        return cls(
            group=group.name,
            workers=workers,
            cores=workers * group.threads,
            memory=workers * group.memory,
            gpus=workers * group.gpus,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "workers": self.workers,
            "cores": self.cores,
            "memory": self.memory,
            "gpus": self.gpus,
        }

    def describe(self) -> str:
        return f"{self.workers} workers · {self.cores} cores · {format_bytes(self.memory)}" + (
            f" · {self.gpus} GPUs" if self.gpus else ""
        )


# -- parsing -----------------------------------------------------------------------------


def _require_mapping(value: Any, field_name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"must be an object, not {type(value).__name__}", field_name)
    return value


_reject_unknown = reject_unknown_fields
_join = field_path


def parse_count(value: Any, field_name: str, *, minimum: int = 0) -> int:
    """A whole number ``>= minimum``; booleans and fractional numbers are refused."""
    if not is_number(value) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidRequest(f"must be a whole number, not {_shown(value)}", field_name)
    if isinstance(value, float):
        value = int(value)
    if value < minimum:
        raise InvalidRequest(f"must be at least {minimum}, not {value}", field_name)
    if value > LARGEST_COUNT:
        raise InvalidRequest(f"must be at most {LARGEST_COUNT}", field_name)
    return value


def parse_size(value: Any, field_name: str, *, allow_zero: bool = False) -> int:
    """A byte count from a number or a size string ``dask.utils.parse_bytes`` accepts."""
    if isinstance(value, str):
        try:
            if not any(c.isdigit() for c in value):  # parse_bytes reads "GiB" as 1 GiB and "" as 1 byte
                raise ValueError(value)
            size = parse_bytes(value)
        except (ValueError, TypeError, OverflowError):
            raise InvalidRequest(
                f"{_shown(value)} is not a size; use e.g. '512 MiB', '4GB', '1TB' or a byte count",
                field_name,
            ) from None
    elif is_number(value):
        size = int(value)
    else:
        raise InvalidRequest(f"must be a size such as '4 GiB' or a byte count, not {_shown(value)}", field_name)
    if size < 0 or (size == 0 and not allow_zero):
        raise InvalidRequest(f"must be a positive size, not {_shown(value)}", field_name)
    if size > LARGEST_SIZE:
        raise InvalidRequest(f"must be at most 8 EiB ({LARGEST_SIZE} bytes)", field_name)
    return size


def _shown(value: Any) -> str:
    """``repr(value)``, shortened: error messages quote what was sent, not megabytes of it."""
    return reprlib.repr(value)


def parse_group(data: Any, field_name: str, *, default_name: str | None = None) -> WorkerGroup:
    data = _require_mapping(data, field_name)
    _reject_unknown(data, {"name", "count", "threads", "memory", "gpus", "resources"}, field_name)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not GROUP_NAME.fullmatch(name):
        raise InvalidRequest(
            f"must be 1-40 letters, digits, '.', '_' or '-', starting with a letter or digit, not {_shown(name)}",
            _join(field_name, "name"),
        )
    for required in ("threads", "memory"):
        if required not in data:
            raise InvalidRequest("is required", _join(field_name, required))
    resources_data = _require_mapping(data.get("resources", {}), _join(field_name, "resources"))
    resources: dict[str, float] = {}
    for key, amount in resources_data.items():
        where = _join(_join(field_name, "resources"), str(key))
        if not isinstance(key, str) or not RESOURCE_NAME.fullmatch(key):
            raise InvalidRequest(f"{_shown(key)} is not a valid resource name", where)
        if key == GPU_RESOURCE:
            raise InvalidRequest("set GPUs with the group's 'gpus' field", where)
        message = f"must be a positive number up to {LARGEST_RESOURCE}, not {_shown(amount)}"
        resources[key] = check_number(
            amount, where, message, minimum=0, exclusive_minimum=True, maximum=LARGEST_RESOURCE
        )
    return WorkerGroup(
        name=name,
        count=parse_count(data.get("count", 0), _join(field_name, "count")),
        threads=parse_count(data["threads"], _join(field_name, "threads"), minimum=1),
        memory=parse_size(data["memory"], _join(field_name, "memory")),
        gpus=parse_count(data.get("gpus", 0), _join(field_name, "gpus")),
        resources=resources,
    )


def parse_spec(
    data: Any, field_name: str = "spec", *, max_workers: int | None = None, max_groups: int | None = None
) -> WorkerSpec:
    """Validate a Worker Spec from its JSON form.

    Raises
    ------
    InvalidRequest
        Naming the field at fault, e.g. ``spec.groups[1].threads``.
    """
    data = _require_mapping(data, field_name)
    _reject_unknown(data, {"groups"}, field_name)
    groups_data = data.get("groups")
    if not isinstance(groups_data, list) or not groups_data:
        raise InvalidRequest("must be a non-empty list of worker groups", _join(field_name, "groups"))
    if max_groups is not None and len(groups_data) > max_groups:
        raise InvalidRequest(
            f"has {len(groups_data)} worker groups; the limit is {max_groups} per cluster", _join(field_name, "groups")
        )
    groups = []
    seen: set[str] = set()
    for i, group_data in enumerate(groups_data):
        where = f"{field_name}.groups[{i}]"
        group = parse_group(group_data, where, default_name="default" if len(groups_data) == 1 else None)
        if group.name in seen:
            raise InvalidRequest(f"group name {group.name!r} is used twice", f"{where}.name")
        seen.add(group.name)
        groups.append(group)
    spec = WorkerSpec(tuple(groups))
    if max_workers is not None and spec.total_workers > max_workers:
        raise InvalidRequest(
            f"asks for {spec.total_workers} workers; the limit is {max_workers} per cluster",
            _join(field_name, "groups"),
        )
    return spec


def parse_target(data: Any, field_name: str = "scale") -> ScaleTarget:
    """Validate ``{"workers": n}``, ``{"cores": n}`` or ``{"memory": size}``, with optional ``group``."""
    data = _require_mapping(data, field_name)
    _reject_unknown(data, {"workers", "cores", "memory", "group"}, field_name)
    units = [unit for unit in ("workers", "cores", "memory") if unit in data]
    if len(units) != 1:
        raise InvalidRequest("give exactly one of 'workers', 'cores' or 'memory'", field_name)
    unit = units[0]
    where = _join(field_name, unit)
    amount = parse_size(data[unit], where, allow_zero=True) if unit == "memory" else parse_count(data[unit], where)
    group = data.get("group")
    if group is not None and not isinstance(group, str):
        raise InvalidRequest(f"must be a group name, not {_shown(group)}", _join(field_name, "group"))
    return ScaleTarget(unit=unit, amount=amount, group=group)


def workers_for(group: WorkerGroup, unit: str, amount: int) -> int:
    """Whole workers of ``group`` that provide ``amount`` of ``unit``, rounding up."""
    if unit == "workers":
        return amount
    per_worker = group.threads if unit == "cores" else group.memory
    return -(-amount // per_worker)  # exact: amount / per_worker overflows a float for huge amounts


def resolve_target(
    spec: WorkerSpec,
    target: ScaleTarget,
    *,
    field_name: str = "scale",
    max_workers: int | None = None,
) -> Resolution:
    """Turn a target into a worker count for one group, checking the per-cluster limit."""
    group = spec.group(target.group, _join(field_name, "group"))
    workers = workers_for(group, target.unit, target.amount)
    if max_workers is not None:
        others = spec.total_workers - group.count
        if others + workers > max_workers:
            raise InvalidRequest(
                f"{target.amount} {target.unit} needs {workers} workers in group {group.name!r}, "
                f"{others + workers} in the cluster; the limit is {max_workers} per cluster",
                _join(field_name, target.unit),
            )
    asked, reason = scale_wording(target, group, workers)
    return replace(Resolution.of(group, workers), asked=asked, reason=reason)


# -- in words: what was asked, and what it became -----------------------------------------------


def counted(n: int, noun: str) -> str:
    """``"1 worker"``, ``"3 workers"``: a count with its noun.

    >>> counted(1, "core"), counted(4, "worker")
    ('1 core', '4 workers')
    """
    return f"{n} {noun if n == 1 else noun + 's'}"


def format_size(n: int) -> str:
    """A byte count as people write it: ``4 GiB``, ``256 MiB``, ``1.5 GiB`` (no trailing zeros).

    >>> format_size(4 * 2**30), format_size(256 * 2**20), format_size(3 * 2**29), format_size(512)
    ('4 GiB', '256 MiB', '1.5 GiB', '512 B')
    """
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n // size} {unit}" if n % size == 0 else f"{round(n / size, 2):g} {unit}"
    return f"{n} B"


def target_words(target: ScaleTarget) -> str:
    """The target as the user said it: ``4 GiB``, ``3 cores``, ``1 worker``.

    >>> target_words(ScaleTarget("memory", 4 * 2**30)), target_words(ScaleTarget("cores", 3))
    ('4 GiB', '3 cores')
    """
    if target.unit == "memory":
        return format_size(target.amount)
    return counted(target.amount, target.unit.removesuffix("s"))


def scale_wording(target: ScaleTarget, group: WorkerGroup, workers: int) -> tuple[str, str]:
    """``(asked, reason)`` of a manual scale: what was asked, and why it became more, when rounded up.

    What it became is the event's ``before`` → ``after`` workers (of the group's shape): with ``asked``, a
    reader (the sidebar's History) says ``4 GiB → 4 workers × 1 GiB``; the reason does not repeat it.

    >>> group = WorkerGroup("default", 1, threads=2, memory=2**30)
    >>> scale_wording(ScaleTarget("memory", 4 * 2**30), group, 4)
    ('4 GiB', 'manual scale')
    >>> scale_wording(ScaleTarget("cores", 3), group, 2)
    ('3 cores', 'manual scale: rounded up to whole workers of 2 cores (4 cores in all)')
    >>> scale_wording(ScaleTarget("workers", 3), group, 3)
    ('3 workers', 'manual scale')
    """
    asked = target_words(target)
    if target.unit == "workers":
        return asked, "manual scale"
    per = format_size(group.memory) if target.unit == "memory" else counted(group.threads, "core")
    total = workers * (group.memory if target.unit == "memory" else group.threads)
    if total == target.amount:
        return asked, "manual scale"
    got = format_size(total) if target.unit == "memory" else counted(total, "core")
    return asked, f"manual scale: rounded up to whole workers of {per} ({got} in all)"


def _shape_words(group: WorkerGroup) -> str:
    gpus = f", {counted(group.gpus, 'GPU')}" if group.gpus else ""
    return f"{counted(group.count, 'worker')} of {counted(group.threads, 'core')}, {format_size(group.memory)}{gpus}"


def spec_edit_words(before: WorkerSpec, after: WorkerSpec) -> dict[str, str]:
    """Per group changed by a Worker Spec edit, what changed: ``{"default": "default memory 8 GiB → 1 GiB"}``.

    >>> old = parse_spec({"groups": [{"name": "default", "count": 2, "threads": 1, "memory": "8 GiB"}]})
    >>> new = parse_spec({"groups": [{"name": "default", "count": 2, "threads": 1, "memory": "1 GiB"},
    ...                              {"name": "big", "count": 1, "threads": 4, "memory": "16 GiB"}]})
    >>> spec_edit_words(old, new)
    {'default': 'default memory 8 GiB → 1 GiB', 'big': 'group big added (1 worker of 4 cores, 16 GiB)'}
    >>> spec_edit_words(new, old)
    {'default': 'default memory 1 GiB → 8 GiB', 'big': 'group big removed'}
    """
    old = {g.name: g for g in before.groups}
    new = {g.name: g for g in after.groups}
    words: dict[str, str] = {}
    for name, group in new.items():
        was = old.get(name)
        if was is None:
            words[name] = f"group {name} added ({_shape_words(group)})"
            continue
        changes = []
        for label, a, b, say in (
            ("workers", was.count, group.count, str),
            ("threads", was.threads, group.threads, str),
            ("memory", was.memory, group.memory, format_size),
            ("GPUs", was.gpus, group.gpus, str),
            ("resources", dict(was.resources), dict(group.resources), lambda r: str(r or "none")),
        ):
            if a != b:
                changes.append(f"{label} {say(a)} → {say(b)}")
        if changes:
            words[name] = f"{name} " + ", ".join(changes)
    for name in old:
        if name not in new:
            words[name] = f"group {name} removed"
    return words
