"""The server's link to a Cluster object's scheduler: subscribed to its worker stream beside the object's own subscription."""

from __future__ import annotations

from clustermgr_lab.cluster.scheduler_link import SchedulerLink

#: The handler through which the server's link subscribes to the worker stream (``objects.ServerWorkerStatus``):
#: ``subscribe_worker_status`` would take the stream away from the Cluster object.
SUBSCRIBE_OP = "clustermgr_subscribe_worker_status"


class ClusterClassLink(SchedulerLink):
    """The link to a Cluster object's scheduler (run in the scheduler links' process, as the object)."""

    subscribe_op = SUBSCRIBE_OP
