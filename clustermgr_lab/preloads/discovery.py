"""Scheduler preload this server gives its kernels: a scheduler started in a notebook announces itself to the server.

The server puts this file in the kernels' Dask config (``distributed.scheduler.preload``, through
the ``DASK_DISTRIBUTED__SCHEDULER__PRELOAD`` environment variable) and names a folder in
``CLUSTERMGR_DISCOVERY_DIR``. A scheduler that starts inside a Jupyter kernel (e.g. a notebook's
``LocalCluster()``) writes one small JSON file there, and removes it when it closes; the server
watches the folder. Anywhere else (``dask scheduler`` processes, the server itself) it does nothing.

It is loaded by path, not as a module, and imports only the standard library, so that kernels of
other Python environments (without clustermgr_lab) load it too.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

DISCOVERY_DIR_ENV = "CLUSTERMGR_DISCOVERY_DIR"
ANNOUNCEMENT = "_clustermgr_announcement"


def _in_a_kernel() -> bool:
    kernelapp = sys.modules.get("ipykernel.kernelapp")
    return kernelapp is not None and kernelapp.IPKernelApp.initialized()


def announcement(scheduler) -> dict:
    """What the server needs to list the scheduler: its address, and who started it."""
    return {
        "address": scheduler.address,
        "pid": os.getpid(),
        "notebook": os.environ.get("JPY_SESSION_NAME") or None,
    }


def dask_setup(scheduler) -> None:
    folder = os.environ.get(DISCOVERY_DIR_ENV)
    if not folder or not _in_a_kernel():
        return
    path = Path(folder) / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
    partial = path.with_suffix(".part")
    try:
        partial.write_text(json.dumps(announcement(scheduler)))
        partial.rename(path)  # the server never reads half a file
    except OSError:  # the server is gone, or its folder: nothing to announce to
        return
    setattr(scheduler, ANNOUNCEMENT, path)


def dask_teardown(scheduler) -> None:
    path = getattr(scheduler, ANNOUNCEMENT, None)
    if path is not None:
        path.unlink(missing_ok=True)
