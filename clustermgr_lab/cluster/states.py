"""The lifecycle states of a managed cluster, and the words its events and errors share."""

from __future__ import annotations

PENDING, RUNNING, SCALING, STOPPING, STOPPED, FAILED = "pending", "running", "scaling", "stopping", "stopped", "failed"
UNRESPONSIVE = "unresponsive"  # running, but the scheduler does not answer: what it holds is unknown
ATTACHED = "attached"  # the template of clusters attached by their scheduler's address
DISCOVERED = "discovered"  # the template of clusters found in a kernel of this server
SCHEDULER_SILENT = "the scheduler has not answered"


def reason_of(exc: BaseException) -> str:
    """An exception as words: its message, or its type's name when it has none (e.g. a bare timeout).

    Examples
    --------
    >>> reason_of(TimeoutError()), reason_of(OSError("refused"))
    ('TimeoutError', 'refused')
    """
    return str(exc).strip() or type(exc).__name__
