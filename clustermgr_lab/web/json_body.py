"""Decoding a request body: JSON only, nested no deeper than a request can need, errors naming where.

Pure: the base handler hands it the raw bytes.

Examples
--------
>>> decode_json_body(b'{"spec": {"groups": []}}')
{'spec': {'groups': []}}
>>> decode_json_body(b'{"spec": [[[1]]]}', max_depth=3)
Traceback (most recent call last):
...
clustermgr_lab.domain.errors.InvalidRequest: nested deeper than 3 levels
"""

from __future__ import annotations

import json
from typing import Any

from clustermgr_lab.domain.errors import InvalidRequest

#: Deepest nesting of objects and arrays a body may have; the API's own bodies need 5.
MAX_DEPTH = 32


def decode_json_body(raw: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``raw``.

    Raises
    ------
    InvalidRequest
        When ``raw`` is not JSON (``NaN`` and ``Infinity`` are not), or nests objects and arrays
        deeper than ``max_depth``: ``field`` then names the value where it goes too deep.
    """
    try:
        value = json.loads(raw, parse_constant=_not_json)
    except RecursionError:  # deeper than the decoder's own stack allows: find where without decoding
        raise _too_deep(_deep_path_in_text(raw.decode("utf-8", errors="replace"), max_depth), max_depth) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from None
    path = _deep_path_in_value(value, max_depth)
    if path is not None:
        raise _too_deep(path, max_depth)
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")


def _too_deep(path: list[str | int] | None, max_depth: int) -> InvalidRequest:
    return InvalidRequest(f"nested deeper than {max_depth} levels", _field(path) if path else None)


def _field(path: list[str | int]) -> str:
    """``["spec", "groups", 0, "resources"]`` → ``spec.groups[0].resources``, as every other error names fields."""
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def _deep_path_in_value(value: Any, max_depth: int) -> list[str | int] | None:
    """The path of the first object or array at depth ``max_depth + 1`` (the body itself is depth 1), if any."""
    stack: list[tuple[Any, list[str | int], int]] = [(value, [], 1)]
    while stack:
        node, path, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth > max_depth:
            return path
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((child, [*path, key], depth + 1) for key, child in items)
    return None


def _deep_path_in_text(text: str, max_depth: int) -> list[str | int] | None:
    """:func:`_deep_path_in_value` for text too deep to decode: a scan of brackets, strings and commas.

    Each open container is ``[bracket, current key or index, expecting a key]``.
    """
    stack: list[list[Any]] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if stack and stack[-1][2]:
                try:
                    stack[-1][1] = json.loads(text[i : end + 1])
                except ValueError:
                    stack[-1][1] = text[i + 1 : end]
                stack[-1][2] = False
            i = end
        elif c in "[{":
            stack.append([c, 0 if c == "[" else None, c == "{"])
            if len(stack) > max_depth:
                return [entry[1] for entry in stack[:-1]]
        elif c in "]}" and stack:
            stack.pop()
        elif c == "," and stack:
            if stack[-1][0] == "[":
                stack[-1][1] += 1
            else:
                stack[-1][2] = True
        i += 1
    return None
