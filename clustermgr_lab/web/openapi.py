"""The OpenAPI 3.1 document of the REST and WebSocket API (``openapi.json`` beside this module)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

DOCUMENT = Path(__file__).with_name("openapi.json")


@functools.lru_cache(maxsize=1)
def _load() -> dict:
    return json.loads(DOCUMENT.read_text())


def openapi_document(base_url: str = "/") -> dict:
    """The document, with ``servers`` pointing at this Jupyter server's base URL."""
    document = copy.deepcopy(_load())
    document["servers"] = [{"url": base_url.rstrip("/") or "/"}]
    return document
