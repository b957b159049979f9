"""The per-cluster event log: lifecycle changes and scaling decisions with their reasons."""

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

    def to_dict(self) -> dict[str, Any]:
        extra = {"cause": self.cause} if self.cause is not None else {}
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
    """

    def __init__(self, maxlen: int = 200):
        self._events: collections.deque[Event] = collections.deque(maxlen=maxlen)
        self.last_decision: Event | None = None
        self.last_departure: Event | None = None  # the latest event with a cause: why a worker last went away
        self.appended = 0  # ever, so that a store can tell which events it has not written yet

    def _append(self, event: Event) -> Event:
        if not event.message.isprintable():  # it may quote a peer (a foreign scheduler's error)
            event = replace(event, message=printable(event.message))
        self._events.append(event)
        self.appended += 1
        return event

    def restore(self, events: list[Event]) -> None:
        """Start from ``events`` read back from a store (they do not count as appended)."""
        self._events.extend(events)
        self.last_decision = next((e for e in reversed(events) if e.kind in ("scale", "note")), self.last_decision)
        self.last_departure = next((e for e in reversed(events) if e.cause), self.last_departure)

    def since(self, appended: int) -> list[Event]:
        """The events appended after the first ``appended`` ones (those still held)."""
        new = min(self.appended - appended, len(self._events))
        return list(self._events)[len(self._events) - new :] if new > 0 else []

    def lifecycle(self, message: str) -> Event:
        return self._append(Event(utcnow(), "lifecycle", message, source="system"))

    def scale(self, group: str, before: int, after: int, reason: str, *, source: str) -> Event:
        event = self._append(Event(utcnow(), "scale", reason, group=group, before=before, after=after, source=source))
        self.last_decision = event
        count_decision("scale", source, reason)
        return event

    def departure(self, message: str, cause: dict[str, Any]) -> Event:
        """A worker went away on its own: ``cause`` says why (``{"kind", "worker", "group", "detail"}``)."""
        event = Event(utcnow(), "lifecycle", message, group=cause.get("group"), source="system", cause=cause)
        self.last_departure = event
        return self._append(event)

    def note(self, group: str | None, message: str, *, source: str) -> Event:
        """A decision *not* to act, e.g. why a cluster cannot shrink."""
        event = self._append(Event(utcnow(), "note", message, group=group, source=source))
        self.last_decision = event
        count_decision("note", source, message)
        return event

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)
