"""Worker preload: a worker of a cluster with TLS serves its own HTTP routes (``/health``, ``/metrics``) only to peers
with the cluster's certificate, and its process title names its cluster and itself.

Added to the worker preloads already configured through ``DASK_DISTRIBUTED__WORKER__PRELOAD`` (see
:func:`~clustermgr_lab.backends.local.backend.worker_preload_environment`). distributed serves a
worker's HTTP routes over HTTPS with the dashboard's TLS settings, but asks no client certificate.
"""

from __future__ import annotations

import distributed.worker

from clustermgr_lab.common.proctitle import label_titles, process_label
from clustermgr_lab.common.security import require_dashboard_client_certificates


def dask_setup(worker) -> None:
    """Called by distributed in the worker process, after its HTTP server listens."""
    require_dashboard_client_certificates(worker)
    label_titles(distributed.worker, "worker", process_label(worker.name))
