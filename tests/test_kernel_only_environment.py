"""Given the extension loaded, only the kernels this server starts get its variables; a site's own link is kept.

The dashboard link (``DASK_DISTRIBUTED__DASHBOARD__LINK``) and discovery's preload and folder go into a
kernel's launch environment, never into the server's own ``os.environ``: a real terminal of the same
server sees the environment it had, and a link the site set itself reaches kernels unchanged unless
``KernelDashboardLink.replace_site_link`` is set.
"""

from __future__ import annotations

import asyncio
import json
import os

import dask.config
import pytest

from clustermgr_lab.foreign.discovery import PRELOAD_ENV
from clustermgr_lab.preloads.discovery import DISCOVERY_DIR_ENV
from clustermgr_lab.web.kernel_dashboard_link import LINK_ENV, KernelDashboardLink, kernel_link_template

from .test_discovery import run_in_kernel

SITE_LINK = "/user/{JUPYTERHUB_USER}/proxy/{port}/status"
OURS = (LINK_ENV, PRELOAD_ENV, DISCOVERY_DIR_ENV)
PRINT_ENV = "import os\nfor name in {names!r}:\n    print('ENV', name, os.environ.get(name, '-'))"


async def kernel_environment(jp_serverapp) -> dict[str, str]:
    """Our variables, as a real kernel of this server sees them ('-': not set)."""
    kernel_id = await jp_serverapp.kernel_manager.start_kernel(kernel_name="python3")
    client = jp_serverapp.kernel_manager.get_kernel(kernel_id).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=120)
        output = await run_in_kernel(client, PRINT_ENV.format(names=OURS))
    finally:
        client.stop_channels()
        await jp_serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)
    return dict(line.split(" ", 2)[1:] for line in output.splitlines() if line.startswith("ENV "))


async def terminal_environment(jp_fetch, jp_ws_fetch) -> str:
    """What ``env`` prints in a real terminal of this server."""
    response = await jp_fetch("api", "terminals", method="POST", body="{}")
    name = json.loads(response.body)["name"]
    socket = await jp_ws_fetch("terminals", "websocket", name)
    try:
        # the shell computes the end marker, so that the echo of the typed line does not contain it
        await socket.write_message(json.dumps(["stdin", "env; echo END-OF-$((6 * 7))\r"]))
        text = ""
        while "END-OF-42" not in text:
            message = await asyncio.wait_for(socket.read_message(), 30)
            assert message is not None, f"the terminal closed: {text!r}"
            kind, *content = json.loads(message)
            if kind == "stdout":
                text += content[0]
        return text
    finally:
        socket.close()
        await jp_fetch("api", "terminals", name, method="DELETE")


async def test_kernels_get_the_variables_and_terminals_and_the_server_do_not(jp_fetch, jp_ws_fetch, jp_serverapp):
    # Given a server with the extension loaded (discovery on, the proxied dashboard link on)
    # Then its own environment has none of the variables it gives kernels
    assert not {name for name in OURS if name in os.environ}
    # And a kernel it starts has all of them: the proxied link below its base URL, the discovery preload and folder
    env = await kernel_environment(jp_serverapp)
    assert env[LINK_ENV] == kernel_link_template(jp_serverapp.base_url)
    assert "clustermgr_lab/preloads/discovery.py" in env[PRELOAD_ENV]
    assert env[DISCOVERY_DIR_ENV].startswith(str(jp_serverapp.web_app.settings["clustermgr_manager"].workdir))
    # While a terminal of the same server sees the environment it had: none of them
    output = await terminal_environment(jp_fetch, jp_ws_fetch)
    assert "PATH=" in output
    for name in OURS:
        assert f"{name}=" not in output, name


@pytest.fixture
def site_link(monkeypatch):
    """A JupyterHub site's own link template, in the server's environment (as a spawner sets it)."""
    monkeypatch.setenv(LINK_ENV, SITE_LINK)
    return SITE_LINK


async def test_a_sites_own_link_reaches_kernels_unchanged(site_link, jp_serverapp):
    # Given a site that set its own dashboard link for its users' kernels
    # When a kernel of this server starts
    env = await kernel_environment(jp_serverapp)
    # Then it has the site's link, not this server's, and discovery still works
    assert env[LINK_ENV] == site_link
    assert "clustermgr_lab/preloads/discovery.py" in env[PRELOAD_ENV]


@pytest.fixture
def replace_site_link(jp_server_config):
    jp_server_config["KernelDashboardLink"] = {"replace_site_link": True}
    return jp_server_config


async def test_a_site_may_opt_in_to_the_proxied_link(site_link, replace_site_link, jp_serverapp):
    # Given a site with its own link that opted in to this server's (replace_site_link)
    env = await kernel_environment(jp_serverapp)
    # Then its kernels get the proxied link, and the server's own environment still has the site's
    assert env[LINK_ENV] == kernel_link_template(jp_serverapp.base_url)
    assert os.environ[LINK_ENV] == site_link


def test_a_link_in_dask_config_files_counts_as_the_sites():
    # Given distributed.dashboard.link set in Dask's config (as a site's /etc/dask/*.yaml sets it)
    link = KernelDashboardLink(base_url="/")
    with dask.config.set({"distributed.dashboard.link": "https://dask.example.org/{port}/status"}):
        # Then a kernel gets no variable that would override it
        assert link.kernel_variables({}) == {}
        # Unless the site opted in
        link.replace_site_link = True
        assert link.kernel_variables({}) == link.kernel_environment()
    # And with distributed's default link, the kernel gets the proxied one
    link.replace_site_link = False
    assert link.kernel_variables({}) == link.kernel_environment()
