"""The two reads the server makes of a gateway itself, without dask-gateway's client: its options and its running clusters.

While someone uses the server (the sidebar's stream is open, or an API request came in the last
``FoundClusters.watch_grace`` seconds), the template probes and the found-cluster rounds ask the
gateway for its cluster options and for this user's running clusters every few seconds. dask-gateway's
client imports distributed, so everything else the backend asks goes through the scheduler links'
process (:mod:`.remote`); asking these two from there would keep that process (~55 MiB) alive for as
long as a JupyterLab tab is open, with no gateway cluster at all. Each is one ``GET`` of the gateway's
REST API (``/api/v1/options``, ``/api/v1/clusters/?status=RUNNING``), sent as dask-gateway's client
sends it: the same address, and the same ``Authorization`` header for ``basic`` and ``jupyterhub``
authentication.

Where the client would do more than that, the reads are not made here (:func:`reads_directly` is
false) and the backend asks the links' process as for everything else: ``kerberos`` authentication
(a GSSAPI exchange), ``jupyterhub`` without ``JUPYTERHUB_API_TOKEN`` (the client's own error), and an
HTTP proxy (dask's ``gateway.http-client.proxy``: an explicit proxy, or ``true``, its default, with
``HTTP(S)_PROXY`` set for the gateway's scheme).

Examples
--------
>>> import dask.config
>>> basic = {"gateway_address": "http://gw:8000", "auth": {"type": "basic", "password": "x"}}
>>> with dask.config.set({"gateway.http-client.proxy": False}):
...     reads_directly(basic), reads_directly({**basic, "auth": {"type": "kerberos"}})
(True, False)
>>> with dask.config.set({"gateway.http-client.proxy": "http://proxy.example.org:3128"}):
...     reads_directly(basic)
False
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import dask.config
from tornado.httpclient import AsyncHTTPClient


def auth_of(options: Mapping[str, Any]) -> dict[str, str]:
    """A template's authentication, or the default (``jupyterhub`` under a hub, else ``basic``): the one choice
    both these reads and dask-gateway's client in the links' process (:mod:`.remote`) make."""
    return dict(
        options.get("auth") or ({"type": "jupyterhub"} if os.environ.get("JUPYTERHUB_API_TOKEN") else {"type": "basic"})
    )


def _authorization(auth: Mapping[str, str]) -> str | None:
    """The ``Authorization`` header dask-gateway's ``BasicAuth`` or ``JupyterHubAuth`` sends; None for any other."""
    if auth["type"] == "basic":
        user, password = auth.get("username") or getpass.getuser(), auth.get("password") or ""
        return "Basic " + base64.b64encode(f"{user}:{password}".encode("latin1")).decode()
    token = os.environ.get("JUPYTERHUB_API_TOKEN")
    if auth["type"] == "jupyterhub" and token:
        return "jupyterhub " + token
    return None


def _http_proxy(address: str) -> bool:
    """Whether dask-gateway's client would reach ``address`` through an HTTP proxy (``gateway.http-client.proxy``)."""
    configured = dask.config.get("gateway.http-client.proxy", True)
    if configured is True:
        return urlparse(address).scheme in urllib.request.getproxies()
    return bool(configured)


def reads_directly(options: Mapping[str, Any]) -> bool:
    """Whether the server reads this gateway's options and running clusters itself (see the module's docstring)."""
    address = options.get("gateway_address")
    return bool(address) and _authorization(auth_of(options)) is not None and not _http_proxy(address)


async def _get(options: Mapping[str, Any], path: str, timeout: float) -> Any:
    """``GET`` ``path`` of the gateway's API; its JSON. What it refuses (404, 422) is a ``ValueError`` with its words.

    Raises
    ------
    ValueError
        The gateway answered 404 or 422 (as dask-gateway's client raises it).
    RuntimeError
        Any other error status, with the gateway's message.
    OSError, tornado.httpclient.HTTPClientError
        The gateway could not be reached, or did not answer within ``timeout`` s.
    """
    authorization = _authorization(auth_of(options))
    assert authorization is not None, "reads_directly() is false for these options"
    response = await AsyncHTTPClient().fetch(
        options["gateway_address"].rstrip("/") + path,
        headers={"Authorization": authorization},
        connect_timeout=timeout,
        request_timeout=timeout,
        raise_error=False,
    )
    if response.code == 599 and response.error is not None:  # no HTTP answer: refused, reset, timed out
        raise response.error
    try:
        body = json.loads(response.body or b"null")
    except ValueError:
        body = None
    if response.code >= 400:
        message = body.get("error") if isinstance(body, dict) else (response.body or b"").decode(errors="replace")
        if response.code in (404, 422):
            raise ValueError(message)
        raise RuntimeError(f"HTTP {response.code}: {message or response.reason}")
    return body


async def read_options(options: Mapping[str, Any], timeout: float) -> list[dict[str, Any]]:
    """The gateway's cluster options specification (``/api/v1/options``), as :mod:`.remote` returns it."""
    return (await _get(options, "/api/v1/options", timeout))["cluster_options"]


async def read_running_names(options: Mapping[str, Any], timeout: float) -> list[str]:
    """The names of this user's running clusters on the gateway (``/api/v1/clusters/?status=RUNNING``)."""
    return list(await _get(options, "/api/v1/clusters/?status=RUNNING", timeout))
