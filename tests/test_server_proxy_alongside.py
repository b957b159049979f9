"""Given jupyter-server-proxy as a site configures it, with this extension installed, then its apps and routes work.

A site's ``ServerProcess`` app (here a tiny ``python -m http.server``, started by jupyter-server-proxy on
first request) and its generic ``/proxy/<port>`` route to a program of the user's both answer, through the
same server whose cluster dashboards those routes cannot reach (tests/test_dashboard.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from tornado.httpclient import HTTPClientError

from .helpers import create, delete_and_wait, running_with, until, wait_for
from .test_dashboard import fetch_raw


@pytest.fixture
def jp_server_config(jp_server_config, tmp_path):
    site = site_folder(tmp_path)
    site.mkdir()
    (site / "index.html").write_text("<title>site app</title>hello from the site's app")
    jp_server_config["ServerProxy"] = {
        "servers": {
            "siteapp": {
                # its `--directory`, of this test alone, is how the process is found and stopped at the end
                "command": [
                    sys.executable,
                    "-m",
                    "http.server",
                    "--bind",
                    "127.0.0.1",
                    "{port}",
                    "--directory",
                    str(site),
                ],
                "timeout": 30,
            }
        }
    }
    return jp_server_config


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def site_folder(tmp_path) -> Path:
    return tmp_path / "site-app"


def site_app_processes(tmp_path) -> list[psutil.Process]:
    """The site app's processes (jupyter-server-proxy starts them detached: found by their command line)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if str(site_folder(tmp_path)) in (process.info["cmdline"] or []):
                found.append(process)
    return found


def supervised_apps(web_app) -> list:
    """The supervised processes (simpervisor) of the ServerProcess apps jupyter-server-proxy started in ``web_app``."""
    found, routers = [], [web_app.default_router, web_app.wildcard_router]
    while routers:
        for rule in getattr(routers.pop(), "rules", ()):
            if hasattr(rule.target, "rules"):
                routers.append(rule.target)
            elif "proc" in (rule.target_kwargs or {}).get("state", {}):
                found.append(rule.target_kwargs["state"]["proc"])
    return found


async def fetch_status(jp_fetch, *path, **kwargs):
    try:
        response = await jp_fetch(*path, **kwargs)
        return response.code, response.body
    except HTTPClientError as exc:
        return exc.code, exc.response.body if exc.response else b""


async def test_a_sites_server_process_app_and_generic_route_work_alongside(
    jp_fetch, jp_serverapp, jp_http_port, jp_base_url, jp_auth_header, tmp_path
):
    # Given a user's own web program on a free port, and a running cluster of this server
    port = free_port()
    (tmp_path / "mine.txt").write_text("the user's own program")
    own = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    cluster_id = await create(jp_fetch)
    try:
        await wait_for(jp_fetch, cluster_id, running_with(1))

        async def program_answers():
            status, body = await fetch_status(jp_fetch, "proxy", str(port), "mine.txt")
            return (status, body) if status == 200 else None

        # When the site's ServerProcess app is opened (jupyter-server-proxy starts it) and the program's generic route
        status, body = await fetch_status(jp_fetch, "siteapp", "index.html")
        # Then both answer through this server
        assert status == 200 and b"hello from the site's app" in body
        assert len(site_app_processes(tmp_path)) == 1
        status, body = await until(program_answers, 30, "the user's program to answer through /proxy/<port>")
        assert body == b"the user's own program"
        status, body = await fetch_raw(
            f"http://127.0.0.1:{jp_http_port}{jp_base_url}", f"proxy/127.0.0.1:{port}/mine.txt", jp_auth_header
        )
        assert status == 200 and body == b"the user's own program"
        # And the server-proxy apps' listing (its lab extension's launcher entries) still names the site's app
        status, body = await fetch_status(jp_fetch, "server-proxy", "servers-info")
        assert status == 200 and b"siteapp" in body
        # And the cluster's dashboard port, meanwhile, is refused on the same routes
        endpoint = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).endpoint
        status, _ = await fetch_status(jp_fetch, "proxy", endpoint.dashboard_address.rsplit(":", 1)[1], "status")
        assert status == 403
    finally:
        own.terminate()
        own.wait(10)
        await delete_and_wait(jp_fetch, cluster_id)
        # jupyter-server-proxy supervises its app (restarts it when it dies) until its server process exits:
        # stopped through its supervisor, as jupyter-server-proxy does at exit
        for process in supervised_apps(jp_serverapp.web_app):
            await process.terminate()
        gone, alive = await asyncio.to_thread(psutil.wait_procs, site_app_processes(tmp_path), 10)
        assert not alive and not site_app_processes(tmp_path)
