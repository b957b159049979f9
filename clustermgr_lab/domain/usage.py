"""What a cluster has used: core-, GPU- and memory-seconds per group and per day, from its workers' lifetimes and shapes.

A worker counts from the moment it connects to the scheduler until it leaves, with what it has
(threads, memory limit, GPUs). :class:`UsageMeter` integrates those *rates* over wall-clock time:
whenever the cluster changes it is told the new rates, and adds the old ones times the time since
the last change, split at UTC midnights into per-day amounts. Between two changes nothing is
recomputed: the API shows the amounts ``as_of`` the last change and the rates since, so a reader
adds ``rate * (now - as_of)`` itself (and the cluster's JSON only changes when the cluster does).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Mapping
from typing import Any

KINDS = ("core_seconds", "gpu_seconds", "memory_seconds")
#: Days a cluster's per-day amounts are kept for (the oldest are dropped first).
MAX_DAYS = 400

Rate = tuple[float, float, float]  # cores, GPUs, bytes of memory


def day_of(seconds: float) -> str:
    """The UTC date (``YYYY-MM-DD``) of a POSIX time."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).date().isoformat()


def _next_midnight(seconds: float) -> float:
    day = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).date() + datetime.timedelta(days=1)
    return datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc).timestamp()


def _zero() -> dict[str, float]:
    return dict.fromkeys(KINDS, 0.0)


def _add(into: dict[str, float], rate: Rate, seconds: float) -> None:
    for kind, per_second in zip(KINDS, rate):
        into[kind] += per_second * seconds


class UsageMeter:
    """One cluster's usage: totals and per-day amounts per group, and the rates since the last change.

    Examples
    --------
    >>> meter = UsageMeter()
    >>> meter.update({"default": (2, 0, 2**30)}, now=0)
    >>> meter.update({}, now=3600)
    >>> meter.totals(3600)["default"]["core_seconds"]
    7200.0
    """

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, float]] = {}
        self.days: dict[str, dict[str, dict[str, float]]] = {}  # date -> group -> amounts
        self.rates: dict[str, Rate] = {}
        self.as_of: float | None = None

    def update(self, rates: Mapping[str, Rate], now: float | None = None) -> None:
        """Add what the old rates used since the last update, then take ``rates`` (group -> cores, GPUs, bytes)."""
        now = time.time() if now is None else now
        if self.as_of is not None and now > self.as_of:
            self.accrue(self.rates, self.as_of, now)
        if self.as_of is None or now > self.as_of:
            self.as_of = now
        self.rates = {group: tuple(map(float, rate)) for group, rate in rates.items() if any(rate)}

    def accrue(self, rates: Mapping[str, Rate], start: float, end: float) -> None:
        """Add ``rates`` held from ``start`` to ``end`` (split at UTC midnights into days)."""
        while start < end and rates:
            stop = min(end, _next_midnight(start))
            day = self.days.setdefault(day_of(start), {})
            for group, rate in rates.items():
                _add(self.groups.setdefault(group, _zero()), rate, stop - start)
                _add(day.setdefault(group, _zero()), rate, stop - start)
            start = stop
        for old in sorted(self.days)[:-MAX_DAYS]:
            del self.days[old]

    def totals(self, now: float | None = None) -> dict[str, dict[str, float]]:
        """Each group's amounts up to ``now`` (the current rates carried on from the last update)."""
        now = time.time() if now is None else now
        result = {group: dict(amounts) for group, amounts in self.groups.items()}
        if self.as_of is not None and now > self.as_of:
            for group, rate in self.rates.items():
                _add(result.setdefault(group, _zero()), rate, now - self.as_of)
        return result

    def by_day(self, now: float | None = None) -> dict[str, dict[str, dict[str, float]]]:
        """Per day (UTC date), each group's amounts, the current rates carried on up to ``now``."""
        now = time.time() if now is None else now
        projected = UsageMeter()
        projected.groups = {}
        projected.days = {day: {g: dict(a) for g, a in groups.items()} for day, groups in self.days.items()}
        if self.as_of is not None and now > self.as_of:
            projected.accrue(self.rates, self.as_of, now)
        return projected.days

    # -- the API's view, and the store's ----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The cluster JSON's ``usage``: amounts as of the last change, and the rates since (per second)."""
        groups = sorted(set(self.groups) | set(self.rates))
        total = _zero()
        for amounts in self.groups.values():
            for kind in KINDS:
                total[kind] += amounts[kind]
        rate = [sum(r[i] for r in self.rates.values()) for i in range(3)]
        return {
            **{kind: round(total[kind], 3) for kind in KINDS},
            "as_of": _iso(self.as_of),
            "rate": _rate_dict(rate),
            "groups": [
                {
                    "name": group,
                    **{kind: round(self.groups.get(group, _zero())[kind], 3) for kind in KINDS},
                    "rate": _rate_dict(self.rates.get(group, (0, 0, 0))),
                }
                for group in groups
            ],
        }

    def to_record(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of,
            "groups": self.groups,
            "days": self.days,
            "rates": {group: list(rate) for group, rate in self.rates.items()},
        }

    @classmethod
    def from_record(cls, data: Mapping[str, Any] | None) -> UsageMeter:
        meter = cls()
        if not data:
            return meter
        meter.as_of = data.get("as_of")
        meter.groups = {g: {**_zero(), **a} for g, a in (data.get("groups") or {}).items()}
        meter.days = {d: {g: {**_zero(), **a} for g, a in gs.items()} for d, gs in (data.get("days") or {}).items()}
        meter.rates = {g: tuple(r) for g, r in (data.get("rates") or {}).items()}
        return meter


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat()


def _rate_dict(rate: Iterable[float]) -> dict[str, float]:
    cores, gpus, memory = rate
    return {"cores": cores, "gpus": gpus, "memory": memory}


def daily_summary(clusters: Iterable[tuple[str, str, UsageMeter]], days: int, now: float | None = None) -> list[dict]:
    """Per UTC day, newest first, the last ``days`` days: each cluster's amounts (per group) and the day's total.

    ``clusters`` are ``(id, name, meter)``. Days without use are listed too (zeros), so a reader sees gaps.
    """
    now = time.time() if now is None else now
    today = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).date()
    wanted = [(today - datetime.timedelta(days=n)).isoformat() for n in range(days)]
    per_cluster = [(cluster_id, name, meter.by_day(now)) for cluster_id, name, meter in clusters]
    summary = []
    for day in wanted:
        total = _zero()
        rows = []
        for cluster_id, name, by_day in per_cluster:
            groups = by_day.get(day)
            if not groups:
                continue
            amounts = _zero()
            for group_amounts in groups.values():
                for kind in KINDS:
                    amounts[kind] += group_amounts[kind]
                    total[kind] += group_amounts[kind]
            rows.append(
                {
                    "id": cluster_id,
                    "name": name,
                    **{kind: round(amounts[kind], 3) for kind in KINDS},
                    "groups": [
                        {"name": group, **{kind: round(a[kind], 3) for kind in KINDS}}
                        for group, a in sorted(groups.items())
                    ],
                }
            )
        summary.append({"date": day, **{kind: round(total[kind], 3) for kind in KINDS}, "clusters": rows})
    return summary
