"""Python client of the REST and WebSocket API.

A client finds its server the way ``jupyter server list`` does, unless it is told where to look::

    from clustermgr_lab.client import ClusterManagerClient, get_client

    manager = ClusterManagerClient()              # or ClusterManagerClient(url, token)
    cluster = manager.create(name="analysis", wait=True)
    manager.scale(cluster["id"], workers=4)
    client = get_client("analysis")               # a distributed.Client
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

import requests
import websocket

if TYPE_CHECKING:
    pass


from clustermgr_lab.client.errors import (
    ClusterFailedError,
    ClusterManagerAPIError,
    ServerNotFoundError,
    WaitTimeout,
    api_error,
)
from clustermgr_lab.client.servers import API, auth_header, discover


class ClusterManagerClient:
    """Talks to the cluster manager of one Jupyter server.

    Parameters
    ----------
    url : str, optional
        The Jupyter server's URL, base URL included (e.g. ``http://127.0.0.1:8888/``). Defaults to
        ``$JUPYTER_URL``, else the first running server whose clustermgr API answers (see
        :func:`discover`), with its token.
    token : str, optional
        The server's token. Defaults to the discovered server's own token when ``url`` was
        discovered, else to ``$JUPYTER_TOKEN``.
    timeout : float
        Seconds to wait for each HTTP answer.

    Notes
    -----
    Cluster dicts have the shape of the OpenAPI ``Cluster`` schema (``clustermgr/api/openapi.json``).
    Every method raises :class:`ClusterManagerAPIError` when the server refuses the request and
    :class:`ServerNotFoundError` when it cannot be reached.
    """

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        url = url or os.environ.get("JUPYTER_URL") or None
        if url is None:
            url, found_token = discover()
            token = found_token if token is None else token
        elif token is None:
            token = os.environ.get("JUPYTER_TOKEN", "")
        self.url = url.rstrip("/") + "/"
        self.token = token
        self.timeout = timeout
        self._session = requests.Session()
        self._session.headers.update(auth_header(token))

    def __repr__(self) -> str:
        return f"ClusterManagerClient({self.url!r})"

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        url = self.url + API + path
        try:
            response = self._session.request(
                method,
                url,
                data=None if body is None else json.dumps(body),
                timeout=self.timeout,
                headers={"Content-Type": "application/json"} if body is not None else None,
            )
        except requests.RequestException as exc:
            raise ServerNotFoundError(f"cannot reach {self.url}: {exc}") from None
        if response.status_code >= 400:
            raise api_error(response.status_code, response.text)
        return response.json()

    @staticmethod
    def _path(cluster_id: str, *rest: str) -> str:
        return "/".join(["clusters", quote(cluster_id, safe=""), *rest])

    # -- reading ---------------------------------------------------------------------------------

    def list(self) -> list[dict[str, Any]]:
        """All clusters of the server, in creation order."""
        return self._request("GET", "clusters")["clusters"]

    def get(self, cluster_id: str) -> dict[str, Any]:
        """One cluster by id."""
        return self._request("GET", self._path(cluster_id))

    def find(self, name_or_id: str) -> dict[str, Any]:
        """One cluster by id, or else by name.

        Raises
        ------
        ClusterManagerAPIError
            ``not_found`` when nothing matches; ``ambiguous`` when several clusters have that name.
        """
        clusters = self.list()
        for cluster in clusters:
            if cluster["id"] == name_or_id:
                return cluster
        named = [c for c in clusters if c["name"] == name_or_id]
        if len(named) > 1:
            ids = ", ".join(c["id"] for c in named)
            raise ClusterManagerAPIError(
                None, "ambiguous", f"several clusters are named {name_or_id!r} ({ids}); use an id"
            )
        if not named:
            raise ClusterManagerAPIError(404, "not_found", f"no cluster with id or name {name_or_id!r}")
        return named[0]

    def templates(self) -> list[dict[str, Any]]:
        """The templates a new cluster can start from."""
        return self._request("GET", "templates")["templates"]

    def events(self, cluster_id: str) -> list[dict[str, Any]]:
        """The cluster's event log (lifecycle changes and scaling decisions), newest last."""
        return self._request("GET", self._path(cluster_id, "events"))["events"]

    def workers(self, cluster_id: str) -> list[dict[str, Any]]:
        """Each worker: ``{"name", "group", "address", "host", "pid", "memory", "memory_limit", "threads", "state"}``."""
        return self._request("GET", self._path(cluster_id, "workers"))["workers"]

    def timeline(self, cluster_id: str) -> dict[str, Any]:
        """The cluster's workers, memory and CPU in use over its life: ``{"resolution", "points"}``, oldest first."""
        return self._request("GET", self._path(cluster_id, "timeline"))

    def logs(self, cluster_id: str) -> list[dict[str, Any]]:
        """The cluster's logs: the scheduler's, then each worker's (``{"name", "worker", "group", "state", ...}``)."""
        return self._request("GET", self._path(cluster_id, "logs"))["logs"]

    def log(self, cluster_id: str, name: str, tail: int = 200) -> str:
        """The last ``tail`` lines of one of the cluster's logs (a name that :meth:`logs` lists)."""
        return self._request("GET", self._path(cluster_id, "logs", quote(name, safe="")) + f"?tail={int(tail)}")["text"]

    def usage(self, days: int = 7) -> list[dict[str, Any]]:
        """Core-, GPU- and memory-seconds per UTC day over all clusters, the last ``days`` days, newest first.

        Each day has its totals and ``clusters``: each cluster that used anything that day, with its groups.
        """
        return self._request("GET", f"usage?days={int(days)}")["days"]

    # -- changing ----------------------------------------------------------------------------------

    def create(
        self,
        template: str | None = None,
        name: str | None = None,
        spec: Mapping[str, Any] | None = None,
        adapt: Mapping[str, Any] | None = None,
        *,
        idle_timeout: float | None = None,
        options: Mapping[str, Any] | None = None,
        wait: bool = False,
        timeout: float = 120.0,
    ) -> dict[str, Any]:
        """Create a cluster; it starts in the background.

        Parameters
        ----------
        template : str, optional
            Template name; the server's default when None.
        name : str, optional
            ``Cluster N`` when None.
        spec : dict, optional
            A Worker Spec (``{"groups": [{"count", "threads", "memory", ...}]}``) replacing the template's.
        adapt : dict, optional
            Adaptive settings (``{"minimum", "maximum", "unit"?, "group"?}``) replacing the template's.
        idle_timeout : float, optional
            Seconds with no tasks and no client after which the cluster shuts itself down (the template's when None).
        options : dict, optional
            Values of the template's user options (``{"walltime": "02:00:00"}``); see ``templates()``.
        wait : bool
            Return only once it is ``running`` (every requested worker connected).
        timeout : float
            Seconds to wait for that.

        Returns
        -------
        dict
            The cluster: ``pending``, or ``running`` with ``wait``.
        """
        body = {"template": template, "name": name, "spec": spec, "adapt": adapt, "idle_timeout": idle_timeout}
        body["options"] = options
        body = {key: value for key, value in body.items() if value is not None}
        cluster = self._request("POST", "clusters", body)
        return self.wait(cluster["id"], "running", timeout) if wait else cluster

    def attach(
        self,
        address: str,
        name: str | None = None,
        *,
        tls: Mapping[str, str] | None = None,
        wait: bool = False,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """List a running cluster started elsewhere (backend ``external``), by its scheduler's address.

        The server reads its workers, cores and memory from the scheduler and proxies its dashboard;
        it never scales it, and :meth:`delete` only detaches it.

        Parameters
        ----------
        address : str
            The scheduler's address, ``tcp://host:port`` (or ``tls://host:port`` with ``tls``).
        name : str, optional
            ``Attached host:port`` when None.
        tls : mapping, optional
            For a ``tls://`` scheduler: ``{"ca_file", "cert", "key"}``, absolute paths of the files its
            Client presents (the server's user must be able to read them).
        wait : bool
            Return only once its scheduler has been reached (``running``).
        timeout : float
            Seconds to wait for that.

        Returns
        -------
        dict
            The cluster: ``pending``, or ``running`` with ``wait``.
        """
        body = {"attach": address, **({"name": name} if name is not None else {})}
        if tls is not None:
            body["tls"] = dict(tls)
        cluster = self._request("POST", "clusters", body)
        return self.wait(cluster["id"], "running", timeout) if wait else cluster

    def scale(
        self,
        cluster_id: str,
        workers: int | None = None,
        cores: int | None = None,
        memory: int | str | None = None,
        group: str | None = None,
    ) -> dict[str, Any]:
        """Scale one group to a number of workers, of cores or of bytes (give exactly one).

        Cores and memory are rounded up to whole workers; a manual scale turns adaptive mode off
        for that group. ``group`` is required when the cluster has several.

        Returns
        -------
        dict
            The cluster, with ``resolved``: ``{"group", "workers", "cores", "memory", "gpus"}``.
        """
        target = {"workers": workers, "cores": cores, "memory": memory, "group": group}
        target = {key: value for key, value in target.items() if value is not None}
        return self._request("PATCH", self._path(cluster_id), {"scale": target})

    def adapt(
        self,
        cluster_id: str,
        minimum: int | str | None = None,
        maximum: int | str | None = None,
        *,
        unit: str | None = None,
        group: str | None = None,
        interval: float | None = None,
        wait_count: int | None = None,
        target_duration: float | None = None,
    ) -> dict[str, Any]:
        """Turn adaptive mode on for one group (or change its range); with no range, turn it off.

        Parameters
        ----------
        minimum, maximum : int or str
            The range, in ``unit`` (``"workers"`` by default, ``"cores"`` or ``"memory"``, where
            sizes like ``"64 GiB"`` are fine). Leave both out to turn adaptive mode off: for
            ``group`` alone when one is named, for every group otherwise.
        group : str, optional
            Required when the cluster has several groups and a range is given.
        interval, wait_count, target_duration : optional
            Seconds between decisions, intervals a lower target must hold before shrinking, and
            seconds the queued work should take.
        """
        settings = {
            "minimum": minimum, "maximum": maximum, "unit": unit, "group": group,
            "interval": interval, "wait_count": wait_count, "target_duration": target_duration,
        }  # fmt: skip
        settings = {key: value for key, value in settings.items() if value is not None}
        if minimum is None and maximum is None:  # off: for one group if named, else for all
            settings = {"group": group, "enabled": False} if group is not None else None
        return self._request("PATCH", self._path(cluster_id), {"adapt": settings})

    def set_spec(self, cluster_id: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the Worker Spec; workers whose group changed shape are replaced."""
        return self._request("PATCH", self._path(cluster_id), {"spec": spec})

    def set_idle_timeout(self, cluster_id: str, seconds: float | None) -> dict[str, Any]:
        """Shut the cluster down after ``seconds`` with no tasks and no client (None: never)."""
        return self._request("PATCH", self._path(cluster_id), {"idle_timeout": seconds})

    def rename(self, cluster_id: str, name: str) -> dict[str, Any]:
        """Give the cluster a new name."""
        return self._request("PATCH", self._path(cluster_id), {"name": name})

    def delete(self, cluster_id: str, *, wait: bool = False, timeout: float = 120.0) -> dict[str, Any]:
        """Stop a cluster; with ``wait``, return only once it has left the list.

        Returns
        -------
        dict
            The cluster as it was when the server accepted the request (``stopping``).
        """
        cluster = self._request("DELETE", self._path(cluster_id))
        if wait:
            with closing(self._follow(cluster_id, timeout, "removed")) as states:
                while next(states) is not None:
                    pass
        return cluster

    # -- following changes ---------------------------------------------------------------------

    def watch(self, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """The stream: a ``snapshot`` message, then one message per change, as they happen.

        Parameters
        ----------
        timeout : float, optional
            Most seconds to wait for each message (:class:`WaitTimeout` after that); None waits forever.

        Yields
        ------
        dict
            ``{"type": "snapshot", "seq", "clusters"}``, then ``{"type": "added" | "changed", "seq",
            "cluster"}`` or ``{"type": "removed", "seq", "id"}``. Closing the generator closes the
            connection.
        """
        connection = self._connect()
        try:
            while True:
                yield self._receive(connection, timeout)
        finally:
            connection.close()

    def wait(
        self,
        cluster_id: str,
        until: str | Callable[[dict[str, Any]], bool] = "running",
        timeout: float = 120.0,
    ) -> dict[str, Any]:
        """Wait, on the stream, until a cluster has a status or satisfies a predicate.

        Parameters
        ----------
        cluster_id : str
        until : str or callable
            A status (``"running"`` means every requested worker has connected), or a function of
            the cluster dict.
        timeout : float
            Seconds.

        Returns
        -------
        dict
            The first state of the cluster that satisfies ``until``.

        Raises
        ------
        ClusterFailedError
            If the cluster fails first.
        ClusterManagerAPIError
            ``not_found`` if it does not exist or is removed.
        WaitTimeout
            If ``timeout`` passes first.
        """
        ready = until if callable(until) else (lambda cluster: cluster["status"] == until)
        with closing(self._follow(cluster_id, timeout, until if isinstance(until, str) else "ready")) as states:
            while True:
                cluster = next(states)
                if cluster is None:
                    raise ClusterManagerAPIError(404, "not_found", f"no cluster with id {cluster_id!r} (any more)")
                if ready(cluster):
                    return cluster
                if cluster["status"] == "failed":
                    raise ClusterFailedError(cluster)

    def _follow(self, cluster_id: str, timeout: float, what: str) -> Iterator[dict[str, Any] | None]:
        """Each new state of one cluster (None once it is gone) until ``timeout``, then :class:`WaitTimeout`."""
        deadline = time.monotonic() + timeout
        cluster = None
        connection = self._connect()
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    status = f"it is {cluster['status']}" if cluster else "it was not seen"
                    raise WaitTimeout(f"cluster {cluster_id} was not {what} within {timeout:g} s; {status}", cluster)
                try:
                    message = self._receive(connection, remaining)
                except WaitTimeout:
                    continue
                if message["type"] == "snapshot":
                    cluster = next((c for c in message["clusters"] if c["id"] == cluster_id), None)
                elif message["type"] == "removed" and message["id"] == cluster_id:
                    cluster = None
                elif message.get("cluster", {}).get("id") == cluster_id:
                    cluster = message["cluster"]
                else:
                    continue
                yield cluster
        finally:
            connection.close()

    def _connect(self) -> websocket.WebSocket:
        parts = urlsplit(self.url + API + "stream")
        url = urlunsplit(parts._replace(scheme="wss" if parts.scheme == "https" else "ws"))
        header = [f"{key}: {value}" for key, value in auth_header(self.token).items()]
        try:
            # A script has no origin; the server refuses foreign ones.
            return websocket.create_connection(url, header=header, suppress_origin=True, timeout=self.timeout)
        except websocket.WebSocketBadStatusException as exc:
            body = (
                exc.resp_body.decode(errors="replace") if isinstance(exc.resp_body, bytes) else str(exc.resp_body or "")
            )
            raise api_error(exc.status_code, body) from None
        except (OSError, websocket.WebSocketException) as exc:
            raise ServerNotFoundError(f"cannot open the stream at {url}: {exc}") from None

    @staticmethod
    def _receive(connection: websocket.WebSocket, timeout: float | None) -> dict[str, Any]:
        # recv() answers pings by itself and keeps waiting, so a server that pings more often than ``timeout``
        # would hold it forever: control frames are taken here and the deadline checked after each.
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                connection.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.001))
                opcode, data = connection.recv_data(control_frame=True)
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    # the server stopped, or let go of a reader that fell too far behind
                    raise websocket.WebSocketConnectionClosedException(
                        "closed by the server; reconnect for a fresh snapshot"
                    )
                if opcode in (websocket.ABNF.OPCODE_TEXT, websocket.ABNF.OPCODE_BINARY):
                    return json.loads(data)
                if deadline is not None and time.monotonic() >= deadline:
                    raise websocket.WebSocketTimeoutException("only pings")
        except websocket.WebSocketTimeoutException:
            raise WaitTimeout(f"no message on the stream within {timeout:g} s") from None
        except (OSError, websocket.WebSocketConnectionClosedException) as exc:
            raise ServerNotFoundError(f"the stream was closed: {str(exc) or 'by the server'}") from None
