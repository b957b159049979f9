"""The one rule for the fields of a request object: any field not named is refused, with one message form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from clustermgr_lab.domain.errors import InvalidRequest


def field_path(prefix: str, key: str) -> str:
    """``prefix.key`` (or ``key`` alone at the top of a body)."""
    return f"{prefix}.{key}" if prefix else key


def reject_unknown_fields(data: Mapping[str, Any], allowed: Iterable[str], prefix: str = "") -> None:
    """Refuse the first field of ``data`` not in ``allowed``: ``unknown field 'x'; expected one of: a, b``.

    Examples
    --------
    >>> reject_unknown_fields({"workers": 2, "nodes": 1}, {"workers", "group"}, "scale")
    Traceback (most recent call last):
    ...
    clustermgr_lab.domain.errors.InvalidRequest: unknown field 'nodes'; expected one of: group, workers
    """
    allowed = set(allowed)
    for key in data:
        if key not in allowed:
            raise InvalidRequest(
                f"unknown field {key!r}; expected one of: {', '.join(sorted(allowed))}", field_path(prefix, key)
            )
