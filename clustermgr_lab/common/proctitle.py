"""Process titles: a scheduler's or worker's cluster and worker name, as ``ps`` and ``/proc/PID/cmdline`` show them.

distributed titles its processes ``dask worker [tls://…]`` (with the ``setproctitle`` package); the
preloads of :mod:`clustermgr_lab.preloads` make that ``dask worker keep-me/default-1 [tls://…]`` and
``dask scheduler keep-me [tls://…]``, the cluster's name coming from :data:`CLUSTER_NAME_ENV`, which
every backend sets for the processes it starts (the name at their start: a renamed cluster's
processes keep theirs).
"""

from __future__ import annotations

import os
from types import ModuleType

#: The variable that carries the cluster's name into its scheduler's and workers' processes.
CLUSTER_NAME_ENV = "CLUSTERMGR_CLUSTER_NAME"


def process_label(name: object = None) -> str:
    """``cluster/worker`` (or the cluster's name alone, for a scheduler) from :data:`CLUSTER_NAME_ENV`.

    >>> os.environ[CLUSTER_NAME_ENV] = "keep-me"
    >>> process_label("default-1"), process_label()
    ('keep-me/default-1', 'keep-me')
    """
    cluster = os.environ.get(CLUSTER_NAME_ENV, "")
    parts = [p for p in (cluster, "" if name is None else str(name)) if p]
    return "/".join(parts)


def label_titles(module: ModuleType, role: str, label: str) -> None:
    """Make every title ``module`` (``distributed.worker`` or ``distributed.scheduler``) sets carry ``label``.

    ``dask {role} [address]`` becomes ``dask {role} {label} [address]``; the title is set now too. Without
    the ``setproctitle`` package (an optional dependency of distributed's), or without a label (a scheduler
    not started by a backend here, e.g. one in the server's own process), titles stay as they are.
    """
    if not label:
        return
    try:
        import setproctitle
    except ImportError:
        return
    prefix = f"dask {role} "

    def titled(title: str) -> None:
        if title.startswith(prefix):
            title = f"{prefix}{label} {title[len(prefix) :]}"
        setproctitle.setproctitle(title)

    module.setproctitle = titled
    titled(f"{prefix}[starting]")
