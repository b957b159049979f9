"""Idle shutdown: the timeout after which a cluster with no tasks and no client shuts itself down.

The scheduler enforces it (``dask scheduler --idle-timeout``, made client-aware by
``scheduler_preload``), so it holds whether or not a Jupyter server is running.
"""

from __future__ import annotations

from typing import Any

from clustermgr_lab.domain.fields import check_number

MAX_IDLE_TIMEOUT = 30 * 86400.0
#: Shorter timeouts (e.g. 1e-300) would stop a cluster before anyone could use it.
MIN_IDLE_TIMEOUT = 1.0


def parse_idle_timeout(value: Any, field_name: str = "idle_timeout") -> float | None:
    """Seconds (at least 1, at most 30 days), or None for no idle shutdown.

    Examples
    --------
    >>> parse_idle_timeout(1800), parse_idle_timeout(None)
    (1800.0, None)
    """
    if value is None:
        return None
    message = f"must be a number of seconds from {MIN_IDLE_TIMEOUT:g} to {MAX_IDLE_TIMEOUT:g} (30 days), or null, not {value!r}"
    return float(check_number(value, field_name, message, minimum=MIN_IDLE_TIMEOUT, maximum=MAX_IDLE_TIMEOUT))
