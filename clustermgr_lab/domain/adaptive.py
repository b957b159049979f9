"""Adaptive mode: the settings (ranges per group) and the policy that turns load into targets.

Pure domain logic. The periodic callback that feeds the policy lives in
:mod:`clustermgr_lab.cluster.adaptive_loop`; the policy only *decides*, and its decisions go through
the same scale routine as a manual scale. The policy is pluggable
(``c.ClusterManager.adaptive_policy``): :class:`AdaptivePolicy` by default, or :class:`GradualPolicy`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dask.utils import format_bytes

from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.fields import check_number, reject_unknown_fields
from clustermgr_lab.domain.spec import WorkerGroup, WorkerSpec, parse_count, parse_size, workers_for

UNITS = ("workers", "cores", "memory")
DEFAULT_INTERVAL = 1.0
DEFAULT_WAIT_COUNT = 1  # idle workers cost core-seconds; bursty work comes back within a second of a wake-up
DEFAULT_TARGET_DURATION = 5.0


@dataclass(frozen=True)
class AdaptRange:
    """Adaptive bounds for one group, in the unit the user chose."""

    group: str
    minimum: int
    maximum: int
    unit: str = "workers"

    def worker_bounds(self, group: WorkerGroup) -> tuple[int, int]:
        """(min, max) in whole workers: the minimum rounds up, the maximum down."""
        low = workers_for(group, self.unit, self.minimum)
        per_worker = {"workers": 1, "cores": group.threads, "memory": group.memory}[self.unit]
        high = max(low, self.maximum // per_worker)
        return low, high

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "minimum": self.minimum, "maximum": self.maximum, "unit": self.unit}


@dataclass(frozen=True)
class AdaptSettings:
    """Adaptive mode for a cluster: one range per adaptive group, and the timing knobs."""

    ranges: tuple[AdaptRange, ...]
    interval: float = DEFAULT_INTERVAL
    wait_count: int = DEFAULT_WAIT_COUNT
    target_duration: float = DEFAULT_TARGET_DURATION

    def range_for(self, group: str) -> AdaptRange | None:
        return next((r for r in self.ranges if r.group == group), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval": self.interval,
            "wait_count": self.wait_count,
            "target_duration": self.target_duration,
            "groups": [r.to_dict() for r in self.ranges],
        }


def counted(n: int, noun: str) -> str:
    """``"1 worker"``, ``"3 workers"``: a count with its noun, as the sidebar shows counts.

    >>> counted(1, "worker"), counted(0, "interval")
    ('1 worker', '0 intervals')
    """
    return f"{n} {noun if n == 1 else noun + 's'}"


def _positive_seconds(value: Any, field_name: str, low: float, high: float) -> float:
    message = f"must be a number of seconds from {low:g} to {high:g}, not {value!r}"
    return float(check_number(value, field_name, message, minimum=low, maximum=high))


def parse_adapt(
    data: Any,
    spec: WorkerSpec,
    current: AdaptSettings | None = None,
    *,
    field_name: str = "adapt",
    max_workers: int | None = None,
) -> AdaptSettings:
    """Validate ``{"minimum", "maximum", "unit", "group"?, "interval"?, "wait_count"?,
    "target_duration"?}`` and merge it into ``current`` (ranges of other groups are kept).

    ``{"enabled": false, "group"?}`` is the other form of an adapt request: see :func:`parse_adapt_off`.

    Examples
    --------
    >>> from clustermgr_lab.domain.spec import parse_spec
    >>> spec = parse_spec({"groups": [{"threads": 2, "memory": "1GiB"}]})
    >>> parse_adapt({"minimum": 0, "maximum": 8, "unit": "cores"}, spec).ranges[0].maximum
    8
    """
    if not isinstance(data, Mapping):
        raise InvalidRequest(f"must be an object or null, not {type(data).__name__}", field_name)
    allowed = {"minimum", "maximum", "unit", "group", "interval", "wait_count", "target_duration", "enabled"}
    reject_unknown_fields(data, allowed, field_name)
    if data.get("enabled", True) is not True:
        raise InvalidRequest(
            f"must be true, or false alone with 'group' to turn a group off, not {data['enabled']!r}",
            f"{field_name}.enabled",
        )
    unit = data.get("unit", "workers")
    if unit not in UNITS:
        raise InvalidRequest(f"must be one of {', '.join(UNITS)}, not {unit!r}", f"{field_name}.unit")
    group_name = data.get("group")
    if group_name is not None and not isinstance(group_name, str):
        raise InvalidRequest(f"must be a group name, not {group_name!r}", f"{field_name}.group")
    group = spec.group(group_name, f"{field_name}.group")
    for required in ("minimum", "maximum"):
        if required not in data:
            raise InvalidRequest("is required", f"{field_name}.{required}")
    if unit == "memory":
        minimum = parse_size(data["minimum"], f"{field_name}.minimum", allow_zero=True)
        maximum = parse_size(data["maximum"], f"{field_name}.maximum", allow_zero=True)
    else:
        minimum = parse_count(data["minimum"], f"{field_name}.minimum")
        maximum = parse_count(data["maximum"], f"{field_name}.maximum")
    if minimum > maximum:
        shown = (format_bytes(minimum), format_bytes(maximum)) if unit == "memory" else (minimum, maximum)
        raise InvalidRequest(f"minimum ({shown[0]}) is larger than maximum ({shown[1]})", f"{field_name}.minimum")
    new_range = AdaptRange(group=group.name, minimum=minimum, maximum=maximum, unit=unit)
    low, high = new_range.worker_bounds(group)
    if max_workers is not None and high > max_workers:
        raise InvalidRequest(
            f"maximum means {high} workers in group {group.name!r}; the limit is {max_workers} per cluster",
            f"{field_name}.maximum",
        )
    base = current or AdaptSettings(ranges=())
    ranges = tuple(r for r in base.ranges if r.group != group.name) + (new_range,)
    ranges = tuple(sorted(ranges, key=lambda r: [g.name for g in spec.groups].index(r.group)))
    settings = replace(base, ranges=ranges)
    if "interval" in data:
        settings = replace(settings, interval=_positive_seconds(data["interval"], f"{field_name}.interval", 0.05, 3600))
    if "target_duration" in data:
        settings = replace(
            settings,
            target_duration=_positive_seconds(data["target_duration"], f"{field_name}.target_duration", 0.01, 86400),
        )
    if "wait_count" in data:
        settings = replace(settings, wait_count=parse_count(data["wait_count"], f"{field_name}.wait_count", minimum=1))
    return settings


@dataclass(frozen=True)
class AdaptOff:
    """A request to turn adaptive mode off for one group (the others stay adaptive)."""

    group: str


def parse_adapt_change(
    data: Any, spec: WorkerSpec, current: AdaptSettings | None = None, *, max_workers: int | None = None
) -> AdaptSettings | AdaptOff | None:
    """A PATCH's ``adapt`` value, parsed once: new settings, :class:`AdaptOff` for one group, or None (all off)."""
    if data is None:
        return None
    if isinstance(data, Mapping) and data.get("enabled") is False:
        return AdaptOff(parse_adapt_off(data, spec))
    return parse_adapt(data, spec, current, max_workers=max_workers)


def parse_adapt_off(data: Mapping[str, Any], spec: WorkerSpec, *, field_name: str = "adapt") -> str:
    """Validate ``{"enabled": false, "group"?}`` and return the group to turn adaptive mode off for."""
    reject_unknown_fields(data, ("enabled", "group"), field_name)
    group_name = data.get("group")
    if group_name is not None and not isinstance(group_name, str):
        raise InvalidRequest(f"must be a group name, not {group_name!r}", f"{field_name}.group")
    return spec.group(group_name, f"{field_name}.group").name


def held_data_note(load: Load) -> str:
    """Why adaptive mode keeps workers that hold data: the cluster is busy with tasks, or a client still holds results.

    Examples
    --------
    >>> held_data_note(Load(ready=3, busy={"w1": 2}))
    'cannot shrink yet: the cluster is busy (5 tasks running or queued)'
    >>> held_data_note(Load())
    'cannot shrink: workers hold data a client still references'
    """
    tasks = load.ready + sum(load.busy.values())
    if tasks:
        return f"cannot shrink yet: the cluster is busy ({counted(tasks, 'task')} running or queued)"
    return "cannot shrink: workers hold data a client still references"


@dataclass(frozen=True)
class Load:
    """What the scheduler reports about its work, as read by the scheduler preload.

    ``cores_wanted``: cores the unrestricted work wants to finish within the target duration.
    ``ready``: unrestricted tasks waiting for a thread. ``memory_pressure``: stored data fills more
    than 60 % of the workers' memory. ``workers_holding_data``: how many workers the scheduler
    would keep to hold the stored data. ``resource_demand``: for tasks that no running worker can
    run, the amount of each resource they need. ``busy``: worker name → tasks processing.
    """

    cores_wanted: int = 0
    ready: int = 0
    memory_pressure: bool = False
    workers_holding_data: int = 0
    resource_demand: Mapping[str, float] = field(default_factory=dict)
    busy: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Load:
        return cls(
            cores_wanted=int(data.get("cores_wanted", 0)),
            ready=int(data.get("ready", 0)),
            memory_pressure=bool(data.get("memory_pressure", False)),
            workers_holding_data=int(data.get("workers_holding_data", 0)),
            resource_demand=dict(data.get("resource_demand", {})),
            busy={str(k): int(v) for k, v in data.get("busy", {}).items()},
        )


@dataclass(frozen=True)
class Proposal:
    """A new plan for one group and why."""

    group: str
    before: int
    after: int
    reason: str


class AdaptivePolicy:
    """Turns a :class:`Load` into per-group worker counts, within each group's range.

    Growth is immediate, to the workers the queued work wants within the target duration.
    Shrinking retires only workers with nothing to do: never while tasks wait for a thread of the
    group (retiring one then saves no core-seconds, it only makes the work finish later), never
    below the workers still running tasks, and never below the workers the scheduler keeps to hold
    data a client still references (it retires the others: their data moves to those). It waits
    until the lower target has held for ``wait_count`` consecutive intervals (1 by default: an
    idle worker is the cost adaptive mode exists to avoid).
    """

    def __init__(self, settings: AdaptSettings):
        self.settings = settings
        self._low_streak: dict[str, int] = {}

    def propose(
        self,
        spec: WorkerSpec,
        load: Load,
        members: Mapping[str, list[str]],
    ) -> tuple[list[Proposal], list[tuple[str, str]]]:
        """Proposals to change group counts, and notes ``(group, why not)`` for held shrinks.

        ``members`` maps a group name to the names of its live (requested) workers.
        """
        proposals: list[Proposal] = []
        notes: list[tuple[str, str]] = []
        desired, reasons = self._desired(spec, load, members)
        total_desired = sum(desired.get(g.name, g.count) for g in spec.groups)
        for group in spec.groups:
            adapt_range = self.settings.range_for(group.name)
            if adapt_range is None:
                continue
            low, high = adapt_range.worker_bounds(group)
            want = min(max(desired[group.name], low), high)
            plan = group.count
            if want > plan:
                self._low_streak[group.name] = 0
                reason = (
                    reasons[group.name]
                    if desired[group.name] > plan
                    else f"adaptive minimum is {counted(low, 'worker')}"
                )
                proposals.append(Proposal(group.name, plan, want, reason))
            elif want < plan:
                if plan > high:
                    proposals.append(Proposal(group.name, plan, want, f"adaptive maximum is {counted(high, 'worker')}"))
                    continue
                running = self._busy(group.name, load, members)
                if (group.is_general and load.ready > 0) or running >= plan:
                    self._low_streak[group.name] = 0  # every worker has work, or work waits for one
                    continue
                want = max(want, running)
                kept = 0
                if group.is_general and total_desired < load.workers_holding_data:
                    # the workers the scheduler keeps for the held data stay; the others retire (their data moves)
                    kept = load.workers_holding_data - (total_desired - desired[group.name])
                    if kept >= plan:
                        self._low_streak[group.name] = 0
                        notes.append((group.name, held_data_note(load)))
                        continue
                    want = max(want, kept)
                streak = self._low_streak.get(group.name, 0) + 1
                self._low_streak[group.name] = streak
                if streak >= self.settings.wait_count:
                    self._low_streak[group.name] = 0
                    if want == kept > max(desired[group.name], running, low):
                        why = f"{counted(plan - want, 'worker')} idle, {counted(kept, 'worker')} kept for held data,"
                    elif desired[group.name] == 0 and running == 0:
                        why = "idle"
                    elif want == running:
                        why = f"{counted(plan - want, 'worker')} idle, nothing queued,"
                    else:
                        why = f"load wants {counted(want, 'worker')}"
                    held = f"{counted(streak, 'interval')} ({streak * self.settings.interval:g} s)"
                    proposals.append(Proposal(group.name, plan, want, f"{why} for {held}"))
            else:
                self._low_streak[group.name] = 0
        return proposals, notes

    @staticmethod
    def _busy(group: str, load: Load, members: Mapping[str, list[str]]) -> int:
        """How many of the group's live workers are running tasks."""
        return sum(1 for name in members.get(group, []) if load.busy.get(name, 0) > 0)

    def _desired(
        self, spec: WorkerSpec, load: Load, members: Mapping[str, list[str]]
    ) -> tuple[dict[str, int], dict[str, str]]:
        desired: dict[str, int] = {}
        reasons: dict[str, str] = {}
        duration = f"{self.settings.target_duration:g} s target duration"
        # Unrestricted work fills the general groups in order, each up to its maximum.
        cores_left = load.cores_wanted
        for group in spec.groups:
            if not group.is_general:
                continue
            adapt_range = self.settings.range_for(group.name)
            high = adapt_range.worker_bounds(group)[1] if adapt_range else group.count
            want = min(math.ceil(cores_left / group.threads), high) if cores_left > 0 else 0
            if load.memory_pressure:
                want = max(want, min(2 * len(members.get(group.name, [])), high))
            cores_left = max(0, cores_left - want * group.threads)
            desired[group.name] = want
            reasons[group.name] = (
                "stored data fills over 60% of worker memory"
                if load.memory_pressure and want
                else f"{counted(load.ready, 'task')} queued, {duration}"
            )
        # Work restricted to a resource grows the groups that provide it.
        for group in spec.groups:
            if group.is_general:
                continue
            busy = self._busy(group.name, load, members)
            extra = 0
            needed = []
            for resource, amount in group.worker_resources.items():
                demand = load.resource_demand.get(resource, 0)
                if demand > 0:
                    extra = max(extra, math.ceil(demand / amount))
                    needed.append(resource)
            desired[group.name] = busy + extra
            reasons[group.name] = f"tasks need {', '.join(needed)}" if needed else "tasks running"
        return desired, reasons


class GradualPolicy(AdaptivePolicy):
    """:class:`AdaptivePolicy`, but a group grows by at most ``max_step`` workers per interval.

    For sites where a burst of jobs is unwelcome (a shared batch queue): load that wants ten more
    workers gets them one interval at a time. Shrinking is unchanged.
    """

    max_step = 1

    def propose(
        self,
        spec: WorkerSpec,
        load: Load,
        members: Mapping[str, list[str]],
    ) -> tuple[list[Proposal], list[tuple[str, str]]]:
        proposals, notes = super().propose(spec, load, members)
        stepped = []
        for proposal in proposals:
            if proposal.after > proposal.before + self.max_step:
                after = proposal.before + self.max_step
                proposal = replace(
                    proposal, after=after, reason=f"{proposal.reason} (growing by {self.max_step} per interval)"
                )
            stepped.append(proposal)
        return stepped, notes
