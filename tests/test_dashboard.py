"""Given a running cluster, its dashboard is reachable through the server, authenticated, and only it."""

import asyncio
import json
import re
from urllib.parse import urlparse

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from .helpers import create, delete_and_wait, running_with, wait_for


async def fetch_status(jp_fetch, *path, **kwargs):
    try:
        response = await jp_fetch(*path, **kwargs)
        return response.code, response.body
    except HTTPClientError as exc:
        return exc.code, exc.response.body if exc.response else b""


async def fetch_raw(server: str, path: str, headers: dict) -> tuple[int, bytes]:
    """GET ``server + path`` as written (jp_fetch would escape the ``:`` of ``/proxy/host:port``)."""
    response = await AsyncHTTPClient().fetch(server + path, headers=headers, raise_error=False, request_timeout=30)
    return response.code, response.body or b""


def dashboard_path(cluster: dict, *page: str) -> tuple[str, ...]:
    """Path segments of a page of the cluster's dashboard, below its ``dashboard_url`` (which carries its key)."""
    base = urlparse(cluster["dashboard_url"]).path.removesuffix("/status")
    return ("clustermgr", *base.split("/clustermgr/", 1)[1].split("/"), *page)


async def running_cluster(jp_fetch):
    cluster_id = await create(jp_fetch)
    return await wait_for(jp_fetch, cluster_id, running_with(1))


async def test_dashboard_is_proxied_for_managed_clusters(jp_fetch, jp_base_url):
    cluster = await running_cluster(jp_fetch)
    # Given a running cluster, its dashboard_url points into this server (with the key of its sandboxed page)
    assert re.fullmatch(
        rf"{re.escape(jp_base_url)}clustermgr/dashboard/{cluster['id']}/key-[A-Za-z0-9_-]{{22}}/status",
        cluster["dashboard_url"],
    )
    # When the status page is fetched through the proxy
    status, body = await fetch_status(jp_fetch, *dashboard_path(cluster, "status"))
    # Then the Dask dashboard answers
    assert status == 200
    assert b"Dask" in body or b"bokeh" in body.lower()
    # And the JSON API of the dashboard is reachable too
    status, body = await fetch_status(jp_fetch, *dashboard_path(cluster, "json", "identity.json"))
    assert status == 200
    assert json.loads(body)["address"] == cluster["scheduler_address"]
    await delete_and_wait(jp_fetch, cluster["id"])


async def test_dashboard_needs_authentication_and_a_managed_cluster(jp_fetch, jp_serverapp):
    cluster = await running_cluster(jp_fetch)
    # Without a token: refused
    status, _ = await fetch_status(
        jp_fetch,
        "clustermgr",
        "dashboard",
        cluster["id"],
        "status",
        headers={"Authorization": ""},
        follow_redirects=False,
    )
    assert status in (302, 403)
    # An unknown cluster id: 404
    status, _ = await fetch_status(jp_fetch, "clustermgr", "dashboard", "unknown", "status")
    assert status == 404
    await delete_and_wait(jp_fetch, cluster["id"])


async def test_generic_proxy_routes_cannot_reach_its_clusters(
    jp_fetch, jp_ws_fetch, jp_serverapp, jp_http_port, jp_base_url, jp_auth_header
):
    # Given jupyter-server-proxy on, as a site has it, and a running cluster: its scheduler's, dashboard's and
    # worker's ports
    assert jp_serverapp.jpserver_extensions.get("jupyter_server_proxy") is True
    cluster = await running_cluster(jp_fetch)
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    endpoint = manager.get(cluster["id"]).endpoint
    dashboard_port = endpoint.dashboard_address.rsplit(":", 1)[1]
    scheduler_port = endpoint.address.rsplit(":", 1)[1]
    (worker,) = [record for record in manager.get(cluster["id"]).reconciler.workers.values() if record.address]
    worker_ports = [worker.address.rsplit(":", 1)[1], worker.info["nanny"].rsplit(":", 1)[1]]
    worker_ports += [str(port) for port in (worker.info.get("services") or {}).values()]
    # When its generic routes are asked for them, in every spelling of this machine
    for port in (dashboard_port, scheduler_port, *worker_ports):
        for path in (
            f"proxy/{port}/status",
            f"proxy/absolute/{port}/status",
            f"proxy/127.0.0.1:{port}/status",
            f"proxy/localhost:{port}/status",
            f"proxy/absolute/127.0.0.1:{port}/status",
        ):
            status, body = await fetch_raw(f"http://127.0.0.1:{jp_http_port}{jp_base_url}", path, jp_auth_header)
            # Then each is refused before anything is proxied, saying which link to use instead
            assert status == 403, (path, status, body[:200])
            assert b"dashboard_url" in body, path
    # And so is a WebSocket to the dashboard's Bokeh endpoint
    with pytest.raises(HTTPClientError) as refused:
        await jp_ws_fetch("proxy", dashboard_port, "status", "ws")
    assert refused.value.code == 403
    # While the cluster's own, sandboxed proxy reaches it
    status, _ = await fetch_status(jp_fetch, *dashboard_path(cluster, "status"))
    assert status == 200
    await delete_and_wait(jp_fetch, cluster["id"])


async def test_dashboard_websocket_needs_authentication(jp_fetch, jp_ws_fetch):
    # Given a running cluster, a WebSocket to its dashboard without a token is refused
    cluster = await running_cluster(jp_fetch)
    try:
        with pytest.raises(HTTPClientError) as refused:
            await jp_ws_fetch("clustermgr", "dashboard", cluster["id"], "status", "ws", headers={"Authorization": ""})
        assert refused.value.code in (302, 403)  # a redirect to the login page, or forbidden: never opened
    finally:
        await delete_and_wait(jp_fetch, cluster["id"])


async def raw_get(port: int, path: str, auth: dict) -> tuple[int, dict[str, str]]:
    """A GET sent as written (no client normalises its ``..``): the status and the headers of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {auth['Authorization']}\r\n\r\n".encode()
    )
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    writer.close()
    headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
    return int(head[0].split()[1]), headers


async def test_dot_segments_below_a_dashboard_are_a_404_never_a_redirect_elsewhere(
    jp_fetch, jp_http_port, jp_base_url, jp_auth_header
):
    # Given a running cluster
    cluster = await running_cluster(jp_fetch)
    unkeyed = f"{jp_base_url}clustermgr/dashboard/{cluster['id']}"
    keyed = urlparse(cluster["dashboard_url"]).path.removesuffix("/status")
    try:
        for base in (unkeyed, keyed):
            for tail in ("/../../api/status", "/%2e%2e/%2E%2E/api/status", "/./status", "/x/..", "/..%2fapi"):
                # When a page is asked for with dot segments (as a client that does not normalise sends it)
                status, headers = await raw_get(jp_http_port, base + tail, jp_auth_header)
                # Then it is a 404, and no redirect carries them into Location
                assert status == 404 and "Location" not in headers, (base + tail, status, headers)
        # While a plain unkeyed page is still redirected to the keyed one
        status, headers = await raw_get(jp_http_port, f"{unkeyed}/status", jp_auth_header)
        assert status == 302 and headers["Location"] == cluster["dashboard_url"], headers
    finally:
        await delete_and_wait(jp_fetch, cluster["id"])
