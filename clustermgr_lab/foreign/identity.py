"""The schema of what a scheduler this server did not start says about itself (``identity()``): checked, trimmed, bounded.

A scheduler reached by attach or discovery is an untrusted peer. Everything the server keeps from
its identity passes :func:`parse_identity` first: wrong types, non-finite or negative numbers,
oversized collections and unprintable text are refused with the path of the value at fault, so
that one bad peer can never make ``GET clusters`` or the stream fail for everyone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clustermgr_lab.domain.fields import is_number

#: Most workers read from one foreign scheduler (the identity call asks for no more).
MAX_WORKERS = 4096
#: Most resources (e.g. ``GPU``) one worker may declare.
MAX_RESOURCES = 32
MAX_TEXT = 200
MAX_PORT = 65535
#: Largest thread count or resource amount believed (beyond it the peer is lying).
MAX_AMOUNT = 2**20
#: Largest memory limit believed, in bytes (1 EiB).
MAX_MEMORY = 2**60


class InvalidIdentity(ValueError):
    """A foreign scheduler's identity does not match the schema; the message names the field."""


@dataclass(frozen=True)
class ForeignIdentity:
    """The parts of a foreign scheduler's identity this server uses, checked."""

    scheduler_id: str
    dashboard_port: int | None
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)


def _text(value: Any, where: str) -> str:
    if not (isinstance(value, str) or is_number(value, integer=True)):
        raise InvalidIdentity(f"{where}: must be a string, not {type(value).__name__}")
    text = str(value)
    if not text or len(text) > MAX_TEXT or not text.isprintable():
        raise InvalidIdentity(f"{where}: must be 1 to {MAX_TEXT} printable characters")
    return text


def _amount(value: Any, where: str, *, integer: bool, upper: float, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not is_number(value, integer=integer, finite=False):  # NaN and infinity are refused below, as out of range
        kind = "an integer" if integer else "a number"
        raise InvalidIdentity(f"{where}: must be {kind}, not {type(value).__name__} {str(value)[:40]!r}")
    if not math.isfinite(value) or not 0 <= value <= upper:
        raise InvalidIdentity(f"{where}: must be between 0 and {upper:g}, not {value!r}")
    return value


def _port(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if not is_number(value, integer=True) or not 1 <= value <= MAX_PORT:
        raise InvalidIdentity(f"{where}: must be a port from 1 to {MAX_PORT}, not {str(value)[:40]!r}")
    return value


def _worker(address: Any, info: Any) -> tuple[str, dict[str, Any]]:
    where = f"workers[{str(address)[:60]!r}]"
    if not isinstance(address, str) or "://" not in address:
        raise InvalidIdentity(f"{where}: a worker's key must be its address")
    _text(address, where)
    if not isinstance(info, Mapping):
        raise InvalidIdentity(f"{where}: must be an object, not {type(info).__name__}")
    resources = info.get("resources") or {}
    if not isinstance(resources, Mapping) or len(resources) > MAX_RESOURCES:
        raise InvalidIdentity(f"{where}.resources: must be an object of at most {MAX_RESOURCES} amounts")
    return address, {
        "name": _text(info.get("name", address), f"{where}.name"),
        "nthreads": _amount(info.get("nthreads", 0), f"{where}.nthreads", integer=True, upper=MAX_AMOUNT),
        "memory_limit": _amount(
            info.get("memory_limit"), f"{where}.memory_limit", integer=True, upper=MAX_MEMORY, optional=True
        ),
        "resources": {
            _text(name, f"{where}.resources"): _amount(
                amount, f"{where}.resources.{str(name)[:40]}", integer=False, upper=MAX_AMOUNT
            )
            for name, amount in resources.items()
        },
    }


def parse_identity(data: Any) -> ForeignIdentity:
    """Check a foreign scheduler's ``identity()`` answer and keep only what is used.

    Raises
    ------
    InvalidIdentity
        Naming the first field that does not match.

    Examples
    --------
    >>> identity = parse_identity({"type": "Scheduler", "id": "Scheduler-1", "services": {"dashboard": 8787},
    ...     "workers": {"tcp://127.0.0.1:4000": {"name": 0, "nthreads": 2, "memory_limit": 2**30,
    ...                                          "resources": {"GPU": 1}}}})
    >>> identity.dashboard_port, identity.workers["tcp://127.0.0.1:4000"]["nthreads"]
    (8787, 2)
    >>> parse_identity({"type": "Scheduler", "id": "s", "workers": {"tcp://h:1": {"nthreads": "abc"}}})
    Traceback (most recent call last):
    ...
    clustermgr_lab.foreign.identity.InvalidIdentity: workers['tcp://h:1'].nthreads: must be an integer, not str 'abc'
    """
    if not isinstance(data, Mapping):
        raise InvalidIdentity(f"the identity must be an object, not {type(data).__name__}")
    if data.get("type") != "Scheduler":
        raise InvalidIdentity(f"type: not a Dask scheduler (it says it is a {str(data.get('type'))[:40]!r})")
    services = data.get("services") or {}
    if not isinstance(services, Mapping):
        raise InvalidIdentity(f"services: must be an object, not {type(services).__name__}")
    workers = data.get("workers") or {}
    if not isinstance(workers, Mapping):
        raise InvalidIdentity(f"workers: must be an object, not {type(workers).__name__}")
    if len(workers) > MAX_WORKERS:
        raise InvalidIdentity(f"workers: more than {MAX_WORKERS}")
    return ForeignIdentity(
        scheduler_id=_text(data.get("id"), "id"),
        dashboard_port=_port(services.get("dashboard"), "services.dashboard"),
        workers=dict(_worker(address, info) for address, info in workers.items()),
    )
