"""``JupyterServerCluster``: a cluster of the Jupyter server as a ``distributed.deploy.Cluster`` for notebooks.

Code written for ``LocalCluster``, dask-gateway's ``GatewayCluster`` or Coiled's ``Cluster`` runs on a
cluster of this server after changing the line that makes the cluster::

    import clustermgr_lab
    from distributed import Client

    cluster = clustermgr_lab.get_cluster("Cluster 1")   # or clustermgr_lab.new_cluster(template="local")
    client = Client(cluster)
    cluster.scale(4)                                     # or memory="16 GiB", cores=8, with group=...
    cluster.adapt(minimum=0, maximum=8)                  # runs in the server: it outlives the kernel
    cluster.close()                                      # lets go; cluster.shutdown() stops it

Everything the object shows follows the server's push stream (one WebSocket per object): reading an
attribute sends no request. Scaling, adaptive mode and logs go through the server's REST API, so the
sidebar sees what a notebook did, and the server keeps adapting when the kernel is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from dask.utils import parse_timedelta
from distributed.core import Status, rpc
from distributed.deploy.cluster import Cluster
from distributed.objects import SchedulerInfo
from distributed.utils import Log, Logs
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from clustermgr_lab.client.api import ClusterManagerClient
from clustermgr_lab.client.connect import SCHEDULER_UP, cluster_security, register_comm
from clustermgr_lab.client.errors import (
    ClusterFailedError,
    ClusterManagerAPIError,
    ServerNotFoundError,
    WaitTimeout,
    api_error,
)
from clustermgr_lab.client.servers import API, auth_header

ENDED = ("stopping", "stopped", "failed")


class JupyterServerCluster(Cluster):
    """A cluster of the Jupyter server, by name or id, as a ``distributed.deploy.Cluster``.

    Made by :func:`get_cluster`, :func:`new_cluster` or :meth:`from_name`; connected with the cluster's
    TLS credentials, so ``Client(cluster)`` works as with any other cluster manager.

    Parameters
    ----------
    name_or_id : str
        The cluster's name (as the sidebar shows it) or id.
    url, token : str, optional
        Where the Jupyter server is; found on its own in its kernels (see :class:`ClusterManagerClient`).
    timeout : float
        Seconds to wait for a cluster that is starting, and for each answer of the server.
    shutdown_on_close : bool
        Whether :meth:`close` also stops the cluster on the server (Coiled's and dask-gateway's
        option). False by default: ``close`` only lets go, :meth:`shutdown` stops it.
    asynchronous : bool
        True inside a running event loop: ``cluster = await get_cluster(name, asynchronous=True)``,
        and every method returns an awaitable.
    loop : tornado.ioloop.IOLoop, optional

    Attributes
    ----------
    state : dict
        The cluster as the server last pushed it (the OpenAPI ``Cluster`` object); None once it was removed.
    security : distributed.Security or None
        The cluster's TLS credentials (None for a plain-TCP cluster started elsewhere).
    """

    def __init__(
        self,
        name_or_id: str,
        *,
        url: str | None = None,
        token: str | None = None,
        timeout: float = 120.0,
        shutdown_on_close: bool = False,
        asynchronous: bool = False,
        loop: Any = None,
    ):
        self._wanted = str(name_or_id)
        self._server = (url, token)
        self._timeout = timeout
        self.shutdown_on_close = shutdown_on_close
        self.state: dict[str, Any] | None = None
        self.security = None
        self._api: ClusterManagerClient | None = None
        self._stream: WebSocketClientConnection | None = None
        self._stream_task: asyncio.Task | None = None
        self._refresh_task: asyncio.Task | None = None
        self._state_changed: asyncio.Condition | None = None
        self._asynchronous = asynchronous
        super().__init__(asynchronous=asynchronous, loop=loop, name=self._wanted)
        if not self.called_from_running_loop:
            self._loop_runner.start()
            self.sync(self._start)

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> JupyterServerCluster:
        """The cluster of that name or id (dask-ctl's and dask-gateway's convention); see :func:`get_cluster`."""
        return cls(name, **kwargs)

    def __await__(self):
        async def started():
            if self.status == Status.created:
                await self._start()
            return self

        return started().__await__()

    # -- what the object shows: the server's push stream ---------------------------------------------

    @property
    def id(self) -> str | None:
        """The cluster's id on the server."""
        return self.state["id"] if self.state else None

    @property
    def dashboard_link(self) -> str:
        """The cluster's dashboard through the Jupyter server's authenticated proxy ('' when it has none).

        In a kernel, a path on the browser's own origin (the server's base URL included), like the
        links the server gives its kernels' Clients, so that it opens wherever JupyterLab is opened
        (behind JupyterHub too); elsewhere, a full URL of the server.
        """
        path = (self.state or {}).get("dashboard_url")
        if not path or self._api is None:
            return ""
        return path if os.environ.get("JPY_PARENT_PID") else urljoin(self._api.url, path)

    @property
    def scheduler_address(self) -> str:
        return (self.state or {}).get("scheduler_address") or "<Not Connected>"

    def _scaling_status(self) -> str:
        workers = (self.state or {}).get("workers") or {}
        adapt = (self.state or {}).get("adapt")
        if adapt:
            ranges = ", ".join(f"{r['group']}: {r['minimum']} to {r['maximum']} {r['unit']}" for r in adapt["groups"])
            mode = f"Adaptive ({ranges})"
        else:
            mode = "Manual"
        running, requested = workers.get("running", 0), workers.get("requested", 0)
        count = running if running == requested else f"{running} / {requested}"
        return f"""
        <table>
            <tr><td style="text-align: left;">Scaling mode: {mode}</td></tr>
            <tr><td style="text-align: left;">Workers: {count}</td></tr>
        </table>
        """

    # -- starting and following -------------------------------------------------------------------------

    async def _start(self) -> None:
        if self.status != Status.created:
            return
        self.status = Status.starting
        try:
            self._state_changed = asyncio.Condition()
            self._api = await asyncio.to_thread(ClusterManagerClient, *self._server, timeout=self._timeout)
            found = await asyncio.to_thread(self._api.find, self._wanted)
            self._stream = await self._connect_stream()
            self.state = await self._snapshot_of(found["id"])
            self._stream_task = asyncio.ensure_future(self._follow_stream())
            await self._until(lambda c: c is not None and c["status"] in SCHEDULER_UP, "running", self._timeout)
            self.name = self.state["name"]
            self.security = cluster_security(self.state)
            connection_args = self.security.get_connection_args("client") if self.security else {}
            register_comm(self.state["scheduler_address"])
            self.scheduler_comm = rpc(self.state["scheduler_address"], connection_args=connection_args)
            self.scheduler_info = SchedulerInfo(await self.scheduler_comm.identity())
            self._refresh_task = asyncio.ensure_future(self._refresh_scheduler_info())
        except BaseException:
            await self._let_go()
            self.status = Status.closed
            raise
        for callback in self.periodic_callbacks.values():
            callback.start()
        self.status = Status.running

    async def _connect_stream(self) -> WebSocketClientConnection:
        parts = urlsplit(self._api.url + API + "stream")
        url = urlunsplit(parts._replace(scheme="wss" if parts.scheme == "https" else "ws"))
        request = HTTPRequest(url, headers=auth_header(self._api.token), request_timeout=self._timeout)
        try:
            return await websocket_connect(request)
        except HTTPClientError as exc:
            body = exc.response.body.decode(errors="replace") if exc.response is not None and exc.response.body else ""
            raise api_error(exc.code, body) from None
        except OSError as exc:
            raise ServerNotFoundError(f"cannot open the stream at {url}: {exc}") from None

    async def _snapshot_of(self, cluster_id: str) -> dict[str, Any]:
        while True:
            message = await self._read()
            if message["type"] == "snapshot":
                for cluster in message["clusters"]:
                    if cluster["id"] == cluster_id:
                        return cluster
                raise ClusterManagerAPIError(404, "not_found", f"no cluster with id {cluster_id!r} (any more)")

    async def _read(self) -> dict[str, Any]:
        text = await self._stream.read_message()
        if text is None:
            raise ServerNotFoundError("the server closed the stream")
        return json.loads(text)

    async def _follow_stream(self) -> None:
        """Keep :attr:`state` as the server pushes it, until the cluster is removed or the stream ends."""
        cluster_id = self.state["id"]
        try:
            while True:
                try:
                    message = await self._read()
                except ServerNotFoundError:
                    break
                if message["type"] == "removed" and message["id"] == cluster_id:
                    await self._set_state(None)
                    break
                if message["type"] in ("added", "changed") and message["cluster"]["id"] == cluster_id:
                    await self._set_state(message["cluster"])
                elif message["type"] == "snapshot":
                    ours = [c for c in message["clusters"] if c["id"] == cluster_id]
                    await self._set_state(ours[0] if ours else None)
                    if not ours:
                        break
        finally:
            async with self._state_changed:
                self._stream_ended = True
                self._state_changed.notify_all()

    _stream_ended = False

    async def _set_state(self, cluster: dict[str, Any] | None) -> None:
        async with self._state_changed:
            self.state = cluster
            self._state_changed.notify_all()

    async def _until(self, ready, what: str, timeout: float, give_up=ENDED) -> dict[str, Any] | None:
        """The first pushed state that satisfies ``ready``, a function of the cluster dict (None once removed).

        Raises for a cluster that goes first or reaches a status of ``give_up``, and :class:`WaitTimeout`
        after ``timeout``.
        """

        def settled():
            if self.state is None or self._stream_ended:
                return True
            return ready(self.state) or self.state["status"] in give_up

        async with self._state_changed:
            try:
                await asyncio.wait_for(self._state_changed.wait_for(settled), timeout)
            except asyncio.TimeoutError:
                status = self.state["status"] if self.state else "gone"
                raise WaitTimeout(
                    f"cluster {self._wanted} was not {what} within {timeout:g} s; it is {status}"
                ) from None
        if ready(self.state):
            return self.state
        if self.state is None:
            raise ClusterManagerAPIError(404, "not_found", f"cluster {self._wanted!r} was removed")
        if self.state["status"] == "failed":
            raise ClusterFailedError(self.state)
        if self._stream_ended and self.state["status"] not in ENDED:
            raise ServerNotFoundError("the server closed the stream")
        raise ClusterManagerAPIError(
            409, "conflict", f"cluster {self.state['name']} ({self.state['id']}) is {self.state['status']}"
        )

    async def _refresh_scheduler_info(self) -> None:
        """Read the scheduler's identity again whenever the pushed worker counts change (no polling)."""
        seen = json.dumps((self.state or {}).get("workers"), sort_keys=True)
        while True:
            async with self._state_changed:
                await self._state_changed.wait_for(
                    lambda: (
                        self.state is None
                        or self._stream_ended
                        or json.dumps(self.state.get("workers"), sort_keys=True) != seen  # noqa: B023 (awaited at once)
                    )
                )
                if self.state is None or self._stream_ended:
                    return
                seen = json.dumps(self.state.get("workers"), sort_keys=True)
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                self.scheduler_info = SchedulerInfo(await self.scheduler_comm.identity())

    # -- what a notebook does -----------------------------------------------------------------------

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The REST client's ``method`` in a thread (the event loop never waits), its answer into :attr:`state`."""

        async def call():
            if self.status != Status.running:
                raise RuntimeError(f"{self!r} is {self.status.name}; get the cluster again")
            if self.state is None:
                raise ClusterManagerAPIError(404, "not_found", f"cluster {self.name!r} was removed")
            await asyncio.to_thread(getattr(self._api, method), self.state["id"], *args, **kwargs)

        return call()

    def scale(
        self,
        n: int | None = None,
        memory: int | str | None = None,
        cores: int | None = None,
        group: str | None = None,
    ) -> None:
        """Scale one worker group to ``n`` workers, ``cores`` cores or ``memory`` bytes (give one of them).

        The server's one scale routine rounds cores and memory up to whole workers and makes that
        the group's plan (the sidebar shows it); a manual scale turns adaptive mode off for that
        group. ``group`` is required when the cluster has several groups.

        Raises
        ------
        ClusterManagerAPIError
            With the server's message and ``field`` when it refuses (e.g. ``scale("lots")``, or both
            ``n`` and ``memory``); nothing changes then.
        """
        return self.sync(self._call, "scale", workers=n, cores=cores, memory=memory, group=group)

    def adapt(
        self,
        minimum: int | None = None,
        maximum: int | None = None,
        *,
        minimum_cores: int | None = None,
        maximum_cores: int | None = None,
        minimum_memory: int | str | None = None,
        maximum_memory: int | str | None = None,
        group: str | None = None,
        interval: str | float | None = None,
        wait_count: int | None = None,
        target_duration: str | float | None = None,
    ) -> None:
        """Let the server scale one group within a range, from the scheduler's load; it keeps doing so without the kernel.

        Parameters
        ----------
        minimum, maximum : int
            The range in workers (``minimum`` defaults to 0); or give ``minimum_cores`` /
            ``maximum_cores``, or ``minimum_memory`` / ``maximum_memory`` (``"64 GiB"``), as with
            ``LocalCluster.adapt``.
        group : str, optional
            Required when the cluster has several groups.
        interval, target_duration : str or float, optional
            ``"500ms"``, ``"5s"`` or seconds; ``wait_count`` as with ``distributed.Adaptive``.

        Notes
        -----
        ``cluster.scale(n)`` turns adaptive mode off again.
        """
        ranges = {
            "workers": (minimum, maximum),
            "cores": (minimum_cores, maximum_cores),
            "memory": (minimum_memory, maximum_memory),
        }
        given = {unit: pair for unit, pair in ranges.items() if pair != (None, None)}
        if len(given) > 1:
            raise ClusterManagerAPIError(
                None, "invalid", "give one range: in workers, in cores or in memory", field="adapt.unit"
            )
        unit, (low, high) = next(iter(given.items()), ("workers", (None, None)))
        seconds = {
            "interval": None if interval is None else parse_timedelta(interval),
            "target_duration": None if target_duration is None else parse_timedelta(target_duration),
        }
        return self.sync(
            self._call,
            "adapt",
            0 if low is None else low,
            high,
            unit=None if unit == "workers" else unit,
            group=group,
            wait_count=wait_count,
            **seconds,
        )

    async def _get_logs(self, cluster: bool = True, scheduler: bool = True, workers: Any = True) -> Logs:
        """The scheduler's and the workers' logs as the server keeps them (the last 10,000 lines of each)."""
        logs = Logs()
        if cluster:
            logs["Cluster"] = Log("\n".join(f"{event['time']} {event['message']}" for event in await self._events()))
        listed = await asyncio.to_thread(self._api.logs, self.state["id"])
        for entry in listed:
            is_scheduler = not entry.get("worker")
            wanted = scheduler if is_scheduler else (workers is True or (workers and entry["worker"] in workers))
            if wanted:
                text = await asyncio.to_thread(self._api.log, self.state["id"], entry["name"], 10_000)
                logs["Scheduler" if is_scheduler and "Scheduler" not in logs else entry["name"]] = Log(text)
        return logs

    async def _events(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self._api.events, self.state["id"])

    def shutdown(self) -> None:
        """Stop the cluster on the server (its workers and scheduler), then let go of it.

        It leaves the sidebar's list. :meth:`close` only lets go.
        """
        return self.sync(self._shutdown)

    async def _shutdown(self) -> None:
        if self.status == Status.running and self.state is not None:
            await asyncio.to_thread(self._api.delete, self.state["id"])
            await self._until(lambda cluster: cluster is None, "removed", self._timeout, give_up=())
        await self._close(shutdown=False)

    async def _close(self, shutdown: bool | None = None) -> None:
        """Let go of the cluster (it keeps running), or stop it too with ``shutdown_on_close``."""
        if self.status == Status.closed:
            return
        if (self.shutdown_on_close if shutdown is None else shutdown) and self.state is not None:
            await self._shutdown()
            return
        self.status = Status.closing
        await self._let_go()
        for callback in self.periodic_callbacks.values():
            callback.stop()
        self.status = Status.closed

    async def _let_go(self) -> None:
        for task in (self._refresh_task, self._stream_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self.scheduler_comm is not None:
            await self.scheduler_comm.close_rpc()

    def __repr__(self) -> str:
        if self.state is None:
            return f"{type(self).__name__}({self._wanted!r}, {self.status.name})"
        return super().__repr__()


def get_cluster(
    name_or_id: str,
    *,
    asynchronous: bool = False,
    url: str | None = None,
    token: str | None = None,
    timeout: float = 120.0,
    shutdown_on_close: bool = False,
    loop: Any = None,
) -> JupyterServerCluster:
    """The ``distributed.deploy.Cluster`` of a cluster of this Jupyter server, by name or id.

    Inside a kernel of the server, the server is found on its own; a cluster that is starting is
    waited for. With ``asynchronous=True``, await the result.

    Raises
    ------
    ClusterManagerAPIError
        ``not_found`` for an unknown name or id, ``ambiguous`` when several clusters have that name,
        ``conflict`` for a cluster that is stopping or stopped.
    ClusterFailedError
        For a cluster that failed, with the server's reason.
    """
    return JupyterServerCluster(
        name_or_id,
        url=url,
        token=token,
        timeout=timeout,
        shutdown_on_close=shutdown_on_close,
        asynchronous=asynchronous,
        loop=loop,
    )


def new_cluster(
    template: str | None = None,
    *,
    spec: Mapping[str, Any] | None = None,
    adapt: Mapping[str, Any] | None = None,
    name: str | None = None,
    idle_timeout: float | None = None,
    options: Mapping[str, Any] | None = None,
    asynchronous: bool = False,
    url: str | None = None,
    token: str | None = None,
    timeout: float = 120.0,
    shutdown_on_close: bool = False,
    loop: Any = None,
) -> JupyterServerCluster:
    """Create a cluster through the sidebar's request and return its object once it runs.

    Parameters
    ----------
    template : str, optional
        A template name (the server's default when None); see ``ClusterManagerClient().templates()``.
    spec, adapt, name, idle_timeout, options
        As in the sidebar's New Cluster dialog (see :meth:`ClusterManagerClient.create`).
    asynchronous, url, token, timeout, shutdown_on_close, loop
        As for :func:`get_cluster`; ``timeout`` also bounds the wait for the cluster to run.

    Raises
    ------
    ClusterManagerAPIError
        When the server refuses the request (its message, with the ``field``); nothing is created.
    ClusterFailedError
        When the cluster fails to start, with the server's reason.
    """
    kwargs = {"url": url, "token": token, "timeout": timeout, "shutdown_on_close": shutdown_on_close, "loop": loop}

    def create() -> str:  # the sidebar's POST; waits on the stream until every requested worker runs
        manager = ClusterManagerClient(url, token, timeout=timeout)
        body = {"spec": spec, "adapt": adapt, "name": name, "idle_timeout": idle_timeout, "options": options}
        return manager.create(template, **body, wait=True, timeout=timeout)["id"]

    if asynchronous:

        async def made() -> JupyterServerCluster:
            return await JupyterServerCluster(await asyncio.to_thread(create), asynchronous=True, **kwargs)

        return made()
    return JupyterServerCluster(create(), **kwargs)
