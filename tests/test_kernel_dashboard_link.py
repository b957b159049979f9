"""Given a kernel of this server, then a Client's ``dashboard_link`` goes through the server's authenticated proxy
(below its base URL) to that Client's own cluster, and a host and port of no listed cluster is a JSON 404."""

from __future__ import annotations

import json
import re

import pytest
from tornado.httpclient import AsyncHTTPClient
from traitlets import TraitError

from clustermgr_lab.web.kernel_dashboard_link import LINK_ENV, KernelDashboardLink, kernel_link_template

from .helpers import REPO, call, create, delete_and_wait, running_with, until, wait_for
from .test_discovery import run_in_kernel

LOCAL_CLUSTER = (
    "LocalCluster(n_workers=0, processes=False, protocol='tcp', host='127.0.0.1', dashboard_address='127.0.0.1:0')"
)


def printed_link(output: str) -> str:
    """The one ``LINK <url>`` line a cell printed (the kernel's stderr may be interleaved with it)."""
    found = re.findall(r"^LINK (\S+)$", output, flags=re.MULTILINE)
    assert len(found) == 1, f"no single dashboard link in the cell's output: {output!r}"
    return found[0]


async def get(url: str, **kwargs):
    return await AsyncHTTPClient().fetch(url, raise_error=False, request_timeout=60, **kwargs)


async def test_a_kernels_client_links_to_its_clusters_dashboard_through_the_proxy(
    jp_fetch, jp_serverapp, jp_http_port, jp_base_url, jp_auth_header
):
    server = f"http://127.0.0.1:{jp_http_port}"
    token = jp_auth_header["Authorization"].removeprefix("token ")
    # Given a running cluster of this server, and a kernel of this server
    cluster = await wait_for(jp_fetch, await create(jp_fetch), running_with(1), what="the cluster to run")
    kernel_id = await jp_serverapp.kernel_manager.start_kernel(kernel_name="python3")
    kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id).client()
    kernel.start_channels()
    try:
        await kernel.wait_for_ready(timeout=120)
        # When a notebook connects a Client to it (as the tests do: tests/helpers.py::cluster_client)
        output = await run_in_kernel(
            kernel,
            f"import json, sys\nsys.path.insert(0, {str(REPO)!r})\nfrom tests.helpers import cluster_client\n"
            f"client = cluster_client(json.loads({json.dumps(cluster)!r}))\nprint('LINK', client.dashboard_link)",
        )
        link = printed_link(output)
        # Then its dashboard link is a path of this server, below its base URL, not the scheduler's own address
        assert link.startswith(f"{jp_base_url}clustermgr/dashboard-at/"), link
        assert link == kernel_link_template(jp_base_url).format(
            host="127.0.0.1", port=jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster["id"]).endpoint
            .dashboard_address.rsplit(":", 1)[1]
        )  # fmt: skip
        # And GETting it with the token opens that cluster's dashboard, through the keyed proxy URL without the token
        response = await get(f"{server}{link}?token={token}")
        assert response.code == 200, (response.code, response.body[:300])
        assert response.effective_url.startswith(f"{server}{cluster['dashboard_url'].removesuffix('/status')}/")
        assert "token" not in response.effective_url
        assert b"bokeh" in response.body.lower()

        # When the notebook also starts a cluster of its own (listed by the server once it is discovered)
        output = await run_in_kernel(
            kernel,
            f"from distributed import LocalCluster\nlocal = {LOCAL_CLUSTER}\n"
            "print('ADDRESS', local.scheduler_address)\nprint('LINK', local.dashboard_link)",
        )
        address = re.search(r"ADDRESS (\S+)", output).group(1)
        own_link = printed_link(output)

        async def discovered():
            _, data = await call(jp_fetch, "GET", "clusters", expect=200)
            found = next((c for c in data["clusters"] if c["scheduler_address"] == address), None)
            return found if found and found["dashboard_url"] else None

        own = await until(discovered, 30, "the notebook's cluster to be listed with its dashboard")
        # Then its link leads to its own dashboard, and the first cluster's still to the first one's
        assert own_link != link and own_link.startswith(f"{jp_base_url}clustermgr/dashboard-at/")
        response = await get(f"{server}{own_link}", headers=jp_auth_header)
        assert response.code == 200, (response.code, response.body[:300])
        assert response.effective_url.startswith(f"{server}{own['dashboard_url'].removesuffix('/status')}/")
        response = await get(f"{server}{link}", headers=jp_auth_header, follow_redirects=False)
        assert response.code == 302
        assert response.headers["Location"] == cluster["dashboard_url"]
        await run_in_kernel(kernel, "local.close()\nclient.close()")
    finally:
        kernel.stop_channels()
        await jp_serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)

    # And a host and port of no cluster this server lists is a JSON 404 naming it, never a redirect elsewhere
    response = await get(f"{server}{jp_base_url}clustermgr/dashboard-at/example.org/80/status", headers=jp_auth_header)
    assert response.code == 404 and "Location" not in response.headers
    error = json.loads(response.body)
    assert error["code"] == "not_found" and error["field"] == "host" and "example.org:80" in error["message"]
    # And without the token, the link leads to the login page, not to the dashboard
    response = await get(f"{server}{link}", follow_redirects=False)
    assert response.code == 302 and "/login?next=" in response.headers["Location"]
    # And once the cluster is gone, so is its link
    await delete_and_wait(jp_fetch, cluster["id"])
    response = await get(f"{server}{link}", headers=jp_auth_header, follow_redirects=False)
    assert response.code == 404


def test_a_public_origin_makes_the_kernels_link_absolute_and_a_bad_one_is_refused():
    # Given a server at /user/ann/ whose users reach it at https://jupyter.example.org
    link = KernelDashboardLink(base_url="/user/ann/", public_origin="https://jupyter.example.org/")
    # Then its kernels' link is absolute, still below the base URL
    template = link.kernel_environment()[LINK_ENV]
    assert template.format(host="127.0.0.1", port=8787, scheme="http") == (
        "https://jupyter.example.org/user/ann/clustermgr/dashboard-at/127.0.0.1/8787/status"
    )
    # And an origin with a path, or without a scheme, is refused naming the option
    for bad in ("jupyter.example.org", "https://jupyter.example.org/user/ann", "ftp://jupyter.example.org"):
        with pytest.raises(TraitError, match="public_origin"):
            KernelDashboardLink(public_origin=bad)
