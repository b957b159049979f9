"""Domain errors: what went wrong, in words a user can act on, and which field caused it."""

from __future__ import annotations


class ClusterManagerError(Exception):
    """Base class of every error the cluster manager reports to its callers.

    Parameters
    ----------
    message : str
        What is wrong, naming the value when it helps.
    field : str, optional
        Dotted path of the request field at fault, e.g. ``"spec.groups[0].memory"``.
    """

    code = "error"
    status = 500

    def __init__(self, message: str, field: str | None = None):
        message = _shortened(message, 1000)  # messages quote what was sent: never megabytes of it
        super().__init__(message)
        self.message = message
        self.field = _shortened(field, 200) if field else None  # an empty key ('{"": 1}') has no path to name

    def to_dict(self) -> dict:
        body = {"code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 30]}... ({len(text)} characters)"


class InvalidRequest(ClusterManagerError):
    """A spec, target or other input is malformed or out of range (maps to 400)."""

    code = "invalid"
    status = 400


class NotFound(ClusterManagerError):
    """The named cluster or template does not exist (maps to 404)."""

    code = "not_found"
    status = 404


class Conflict(ClusterManagerError):
    """The request is valid but not in the cluster's current state (maps to 409)."""

    code = "conflict"
    status = 409


class BackendError(ClusterManagerError):
    """A backend could not start or stop processes."""

    code = "backend_error"
    status = 500


class SchedulerTimeout(ClusterManagerError):
    """A scheduler did not answer a call in time (stopped, overloaded or unreachable)."""

    code = "scheduler_timeout"
    status = 504


class StoreUnavailable(ClusterManagerError):
    """The cluster store cannot be written (disk full, read-only, deleted): nothing is started until it can (503)."""

    code = "store_unavailable"
    status = 503
