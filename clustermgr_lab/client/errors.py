"""The errors of the client side: each says, in words a user can act on, what went wrong."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

HTTP_CODES = {400: "invalid", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 409: "conflict"}


class ClientError(Exception):
    """Base class of every error this client raises."""


class ServerNotFoundError(ClientError):
    """No Jupyter server with the clustermgr extension could be found or reached."""


class ClusterManagerAPIError(ClientError):
    """The server refused a request, or the cluster asked for does not exist.

    Parameters
    ----------
    status : int or None
        The HTTP status (None when the client itself found the problem, e.g. an ambiguous name).
    code : str
        ``invalid``, ``not_found``, ``conflict``, ``forbidden``...
    message : str
        The server's explanation.
    field : str, optional
        Dotted path of the request field at fault, e.g. ``"scale.workers"``.
    """

    def __init__(self, status: int | None, code: str, message: str, field: str | None = None):
        super().__init__(f"{field}: {message}" if field and field not in message else message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class ClusterFailedError(ClientError):
    """A cluster being waited for failed; ``cluster`` is its last state and ``cluster["error"]`` says why."""

    def __init__(self, cluster: Mapping[str, Any]):
        super().__init__(f"cluster {cluster['name']} ({cluster['id']}) failed: {cluster['error']}")
        self.cluster = cluster


class WaitTimeout(ClientError, TimeoutError):
    """Nothing happened in time; ``cluster`` is the last state seen of the cluster waited for, if any."""

    def __init__(self, message: str, cluster: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.cluster = cluster


def api_error(status: int, text: str) -> ClusterManagerAPIError:
    try:
        body = json.loads(text)
        return ClusterManagerAPIError(status, body["code"], body["message"], body.get("field"))
    except (ValueError, KeyError, TypeError):
        return ClusterManagerAPIError(
            status, HTTP_CODES.get(status, "http_error"), f"HTTP {status}: {text[:200].strip()}"
        )
