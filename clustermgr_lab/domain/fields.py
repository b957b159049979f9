"""The rules every request field shares: any field not named is refused, what counts as a number, printable text.

One message form for an unknown field; one test of a number (an ``int`` or ``float``, never a
``bool``, which Python counts as an ``int`` but JSON and a user do not) and of its range; one way
of making text from elsewhere (a peer's error) safe to show on a terminal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from clustermgr_lab.domain.errors import InvalidRequest


def printable(text: str) -> str:
    """``text`` with every control, format or other unprintable character escaped (``\\x1b``, ``\\n``, ``\\u202e``).

    What a peer sends (a foreign scheduler's error) may hold terminal escape sequences, line breaks
    or bidi overrides; shown escaped, it can neither drive a terminal nor forge a line of output.

    Examples
    --------
    >>> print(printable("\\x1b[31mred\\x1b[0m\\r\\nok \\u202e"))
    \\x1b[31mred\\x1b[0m\\r\\nok \\u202e
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


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


def is_number(value: Any, *, integer: bool = False, finite: bool = True) -> bool:
    """Whether ``value`` is a number: an ``int`` or ``float``, not a ``bool``.

    Parameters
    ----------
    value : Any
        What a request (or a peer, or a config file) sent.
    integer : bool
        Only an ``int`` counts (``2.0`` does not).
    finite : bool
        Infinity and NaN do not count (an ``int`` always does, however large).

    Examples
    --------
    >>> is_number(2), is_number(2.5), is_number(True), is_number("2")
    (True, True, False, False)
    >>> is_number(2.0, integer=True), is_number(float("inf")), is_number(float("nan"), finite=False)
    (False, False, True)
    """
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return False
    return not finite or isinstance(value, int) or math.isfinite(value)


def check_number(
    value: Any,
    field: str,
    message: str,
    *,
    integer: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
) -> Any:
    """``value`` if it is a finite number from ``minimum`` to ``maximum``, else ``InvalidRequest(message, field)``.

    Parameters
    ----------
    value : Any
        The value to check.
    field : str
        Dotted path of the field, named by the error.
    message : str
        What the error says (each field words its own, naming the range and ``value``).
    integer : bool
        Only an ``int`` counts, as in :func:`is_number`.
    minimum, maximum : float, optional
        The range, both ends included; ``None``: no bound at that end.
    exclusive_minimum : bool
        ``minimum`` itself is out of range (``0 < value``).

    Examples
    --------
    >>> check_number(8080, "port", "must be a port", integer=True, minimum=1, maximum=65535)
    8080
    >>> check_number(0, "gpu", "must be positive", minimum=0, exclusive_minimum=True)
    Traceback (most recent call last):
    ...
    clustermgr_lab.domain.errors.InvalidRequest: must be positive
    """
    if not is_number(value, integer=integer) or not _within(value, minimum, maximum, exclusive_minimum):
        raise InvalidRequest(message, field)
    return value


def _within(value: float, minimum: float | None, maximum: float | None, exclusive_minimum: bool) -> bool:
    if minimum is not None and (value <= minimum if exclusive_minimum else value < minimum):
        return False
    return maximum is None or value <= maximum
