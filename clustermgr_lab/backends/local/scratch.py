"""Where local workers keep spilled data: a private folder per cluster, one per worker in it, gone with the cluster.

Left to itself, every worker on a machine shares ``<temporary-directory>/dask-scratch-space``: each new
worker takes that folder's global lock, then tries the lock of every other worker's folder there to
purge stale ones, so starting N workers costs O(N²) lock attempts, serialised (distributed warns that
"Creating scratch directories is taking a surprisingly long time" past a second). A worker of this
backend gets ``--local-directory <root>/<cluster id>/<worker name>`` instead: its workspace holds only
its own folders (a restarted worker still purges its dead predecessor's). The root is
``<temporary-directory>/clustermgr-scratch-<uid>`` (dask's ``temporary-directory`` as the site set it,
else the system's temporary folder), private to this user; the cluster's folder is removed when the
cluster is, so nothing is left behind.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import dask.config

from clustermgr_lab.common.security import UnsafePath, private_folder

log = logging.getLogger(__name__)


def scratch_root() -> Path:
    """``<dask temporary-directory or the system's temporary folder>/clustermgr-scratch-<uid>``.

    >>> import dask
    >>> with dask.config.set({"temporary-directory": "/scratch"}):
    ...     str(scratch_root()).startswith("/scratch/clustermgr-scratch-")
    True
    """
    base = dask.config.get("temporary-directory", None) or tempfile.gettempdir()
    return Path(base) / f"clustermgr-scratch-{os.getuid()}"


def cluster_scratch(cluster_id: str) -> Path | None:
    """The private folder of one cluster's workers (made if missing); None, with a log line, when it cannot be used.

    Blocking (mkdir, stat): call it in a thread. None leaves the workers on distributed's default.
    """
    try:
        private_folder(scratch_root())
        return private_folder(scratch_root() / cluster_id)
    except (OSError, UnsafePath) as exc:
        log.warning("cluster %s: no private scratch folder (%s); its workers use dask's default", cluster_id, exc)
        return None


def remove_cluster_scratch(cluster_id: str) -> None:
    """Remove one cluster's scratch folder, if any (blocking: in a thread)."""
    shutil.rmtree(scratch_root() / cluster_id, ignore_errors=True)
