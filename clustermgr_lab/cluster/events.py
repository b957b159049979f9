"""The per-cluster event log: lifecycle changes and scaling decisions with their reasons, repeats counted.

An event like the one before it (same kind, message, group, source, before and after) is not logged
again: the earlier one's ``count`` rises and its ``time`` moves on, and it counts as changed, so the
push stream and the store send and keep it anew (:meth:`EventLog.since`).
"""

from __future__ import annotations

import collections
import datetime
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from clustermgr_lab.common.metrics import count_decision
from clustermgr_lab.domain.fields import printable


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


INFO, WARNING = "info", "warning"


@dataclass(frozen=True)
class Event:
    """One entry: ``kind`` is ``"lifecycle"`` or ``"scale"``; scale events carry before → after."""

    time: datetime.datetime
    kind: str
    message: str
    group: str | None = None
    before: int | None = None
    after: int | None = None
    source: str | None = None  # "manual" | "adaptive" | "spec" | "system"
    #: why a worker went away, on worker-departure events: ``{"kind", "worker", "group", "detail"}`` (:mod:`.departures`)
    cause: dict[str, Any] | None = None
    #: what was asked, as the user said it ("4 GiB", "3 workers", "spec edited: default memory 8 GiB → 1 GiB")
    asked: str | None = None
    #: how many times in a row it happened
    count: int = 1
    #: "warning" only for a condition a user must act on; else "info"
    level: str = INFO

    def repeats(self, other: Event) -> bool:
        """Whether ``other`` is this event again (counted into it rather than logged)."""
        return (self.kind, self.message, self.group, self.source, self.before, self.after, self.cause, self.asked) == (
            other.kind, other.message, other.group, other.source, other.before, other.after, other.cause, other.asked,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"cause": self.cause} if self.cause is not None else {}
        if self.asked is not None:
            extra["asked"] = self.asked
        if self.count != 1:
            extra["count"] = self.count
        if self.level != INFO:
            extra["level"] = self.level
        return {
            "time": self.time.isoformat(),
            "kind": self.kind,
            "message": self.message,
            "group": self.group,
            "before": self.before,
            "after": self.after,
            "source": self.source,
            **extra,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        return cls(**{**data, "time": datetime.datetime.fromisoformat(data["time"])})


class EventLog:
    """A bounded log, oldest entries dropped first.

    Examples
    --------
    >>> log = EventLog(maxlen=2)
    >>> _ = log.scale("default", 0, 4, "manual scale", source="manual")
    >>> log.last_decision.after
    4
    >>> _ = log.note("default", "cannot shrink yet", source="adaptive")
    >>> _ = log.note("default", "cannot shrink yet", source="adaptive")
    >>> [(e.message, e.count) for e in log], log.appended
    ([('manual scale', 1), ('cannot shrink yet', 2)], 3)
    >>> [e.count for e in log.since(2)]
    [2]
    """

    def __init__(self, maxlen: int = 200):
        self._events: collections.deque[Event] = collections.deque(maxlen=maxlen)
        self._marks: collections.deque[int] = collections.deque(maxlen=maxlen)  # each event's appended at its change
        self.last_decision: Event | None = None
        self.last_departure: Event | None = None  # the latest event with a cause: why a worker last went away
        #: events appended or counted again, ever: a store or a feed asks :meth:`since` what changed after its mark
        self.appended = 0

    def _append(self, event: Event) -> Event:
        if not event.message.isprintable():  # it may quote a peer (a foreign scheduler's error)
            event = replace(event, message=printable(event.message))
        self.appended += 1
        if self._events and self._events[-1].repeats(event):
            last = self._events[-1]
            event = replace(last, time=event.time, count=last.count + 1, level=event.level)
            self._events[-1], self._marks[-1] = event, self.appended
        else:
            self._events.append(event)
            self._marks.append(self.appended)
        return event

    def restore(self, events: list[Event]) -> None:
        """Start from ``events`` read back from a store (they do not count as appended)."""
        self._events.extend(events)
        self._marks.extend(0 for _ in events)
        self.last_decision = next((e for e in reversed(events) if e.kind in ("scale", "note")), self.last_decision)
        self.last_departure = next((e for e in reversed(events) if e.cause), self.last_departure)

    def since(self, appended: int) -> list[Event]:
        """The events appended, or counted again, after mark ``appended`` (those still held), oldest first."""
        new = []
        for mark, event in zip(reversed(self._marks), reversed(self._events)):
            if mark <= appended:
                break
            new.append(event)
        return new[::-1]

    def lifecycle(self, message: str, *, level: str = INFO) -> Event:
        return self._append(Event(utcnow(), "lifecycle", message, source="system", level=level))

    def scale(
        self, group: str, before: int, after: int, reason: str, *, source: str, asked: str | None = None,
        level: str = INFO,
    ) -> Event:  # fmt: skip
        event = Event(
            utcnow(), "scale", reason, group=group, before=before, after=after, source=source, asked=asked, level=level
        )
        event = self._append(event)
        self.last_decision = event
        count_decision("scale", source, reason)
        return event

    def departure(self, message: str, cause: dict[str, Any], *, level: str = INFO) -> Event:
        """A worker went away on its own: ``cause`` says why (``{"kind", "worker", "group", "detail"}``)."""
        event = Event(
            utcnow(), "lifecycle", message, group=cause.get("group"), source="system", cause=cause, level=level
        )
        self.last_departure = self._append(event)
        return self.last_departure

    def note(self, group: str | None, message: str, *, source: str, level: str = INFO) -> Event:
        """A decision *not* to act, e.g. why a cluster cannot shrink."""
        event = self._append(Event(utcnow(), "note", message, group=group, source=source, level=level))
        self.last_decision = event
        count_decision("note", source, message)
        return event

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)
