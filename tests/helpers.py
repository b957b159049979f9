"""Shared test helpers: API calls checked against the OpenAPI document, waiting (for cluster states, for any
condition, with a deadline), deleting clusters, listing SLURM jobs, running scripts."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import psutil
import pytest
from openapi_schema_validator import OAS31Validator, oas31_format_checker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from tornado.httpclient import HTTPClientError

from clustermgr_lab.web.openapi import openapi_document

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

API_PREFIX = ("clustermgr", "api")
API_TIMEOUT = 120.0  # seconds an API call of a test may take: one deadline for every test's requests
#: one small local worker: the default group of :func:`create`
SMALL = {"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}
DOCUMENT_URI = "urn:clustermgr-lab:openapi"
REPO = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def _document() -> dict:
    return openapi_document()


@functools.lru_cache(maxsize=1)
def _registry() -> Registry:
    return Registry().with_resource(
        DOCUMENT_URI, Resource.from_contents(_document(), default_specification=DRAFT202012)
    )


def validate_schema(instance, *where: str, what: str) -> None:
    """Validate ``instance`` against the schema found at ``where`` in the OpenAPI document.

    Parameters
    ----------
    instance : object
        A decoded JSON value.
    *where : str
        Keys leading to the schema, e.g. ``"components", "schemas", "Cluster"``.
    what : str
        Named in the assertion message when it fails.
    """
    pointer = "/".join(key.replace("~", "~0").replace("/", "~1") for key in where)
    validator = OAS31Validator(
        {"$ref": f"{DOCUMENT_URI}#/{pointer}"}, registry=_registry(), format_checker=oas31_format_checker
    )
    errors = [jsonschema.exceptions.best_match([e]) for e in validator.iter_errors(instance)]
    if errors:
        details = "\n".join(f"  at {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors)
        raise AssertionError(
            f"{what} does not match the OpenAPI document ({'/'.join(where)}):\n{details}\n{instance!r}"
        )


def validate_stream_message(message: dict) -> None:
    """Assert that one WebSocket message matches ``components/schemas/StreamMessage``."""
    validate_schema(message, "components", "schemas", "StreamMessage", what="stream message")


def operation_path(*path: str) -> str:
    """The OpenAPI path that ``clustermgr/api/<path>`` matches, e.g. ``/clustermgr/api/clusters/{cluster_id}``."""
    segments = [*API_PREFIX, *path]
    for template in _document()["paths"]:
        parts = template.strip("/").split("/")
        if len(parts) == len(segments) and all(
            p == s or (p.startswith("{") and p.endswith("}")) for p, s in zip(parts, segments)
        ):
            return template
    raise AssertionError(f"no path of the OpenAPI document matches /{'/'.join(segments)}")


def validate_response(method: str, path: tuple[str, ...], status: int, content_type: str | None, data) -> None:
    """Assert that a response is documented for its path, method and status, and matches that schema.

    A 5xx may fall back on the operation's ``default`` response; any other status must be listed.
    """
    template = operation_path(*path)
    operation = _document()["paths"][template].get(method.lower())
    assert operation is not None, f"{method} {template} is not in the OpenAPI document"
    responses = operation["responses"]
    key = str(status) if str(status) in responses else ("default" if status >= 500 and "default" in responses else None)
    what = f"{method} {template} {status}"
    assert key is not None, f"{what}: the OpenAPI document does not list this status; body: {data!r}"
    where = ["paths", template, method.lower(), "responses", key]
    if "$ref" in responses[key]:
        where = responses[key]["$ref"].removeprefix("#/").split("/")
    response = functools.reduce(lambda node, key: node[key], where, _document())
    assert "application/json" in response.get("content", {}), f"{what}: the OpenAPI document gives no JSON body"
    assert (content_type or "").split(";")[0].strip() == "application/json", f"{what}: Content-Type is {content_type!r}"
    validate_schema(data, *where, "content", "application/json", "schema", what=what)


def strict_json(payload: bytes | str):
    """Decode JSON as a browser would: ``NaN`` and ``Infinity`` are not JSON."""

    def refuse(constant: str):
        raise AssertionError(f"the server answered {constant}, which is not JSON: {payload[:300]!r}")

    return json.loads(payload, parse_constant=refuse)


async def call(jp_fetch, method: str, *path: str, body=None, expect: int | None = None):
    """Call the API and return ``(status, json)``; HTTP errors are returned, not raised.

    Every answer, success or error, is checked against the OpenAPI document for its path,
    method and status.
    """
    return await call_as(jp_fetch, None, method, *path, body=body, expect=expect)


async def call_as(jp_fetch, headers: dict | None, method: str, *path: str, body=None, expect: int | None = None):
    """:func:`call` with these request headers (``{"Authorization": ""}`` sends no token)."""
    # tornado's default 20 s is shorter than a busy server's answer can take at load 10+ on 2 cores
    kwargs = {"method": method, "headers": headers, "request_timeout": API_TIMEOUT}
    if body is not None:
        kwargs["body"] = body if isinstance(body, (str, bytes)) else json.dumps(body)
    elif method in ("POST", "PATCH", "PUT"):
        kwargs["body"] = "{}"
    try:
        response = await jp_fetch(*API_PREFIX, *path, **kwargs)
        status, payload, response_headers = response.code, response.body, response.headers
    except HTTPClientError as exc:
        status = exc.code
        payload, response_headers = (exc.response.body, exc.response.headers) if exc.response else (b"", {})
    data = strict_json(payload) if payload else None
    if expect is not None:
        assert status == expect, (status, data)
    validate_response(method, path, status, response_headers.get("Content-Type"), data)
    return status, data


async def wait_for(jp_fetch, cluster_id: str, predicate, timeout: float = 60, what: str = "condition"):
    """Poll GET /clusters/{id} until ``predicate(cluster)`` holds; return that cluster."""
    deadline = time.monotonic() + timeout
    cluster = None
    while time.monotonic() < deadline:
        status, cluster = await call(jp_fetch, "GET", "clusters", cluster_id)
        if status == 200 and predicate(cluster):
            return cluster
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last state: {cluster}")


async def wait_gone(jp_fetch, cluster_id: str, timeout: float = 15) -> int:
    """Poll GET /clusters/{id} until it answers 404 (or ``timeout`` passes); return the last status."""
    deadline = time.monotonic() + timeout
    while True:
        status, _ = await call(jp_fetch, "GET", "clusters", cluster_id)
        if status == 404 or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.1)


async def until(condition, timeout: float, what: str, step: float = 0.1):
    """Call ``condition()`` (a function or a coroutine function) until it returns something truthy; return that.

    Raises AssertionError naming ``what`` once ``timeout`` seconds have passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(step)


def eventually(condition, timeout: float, what: str, step: float = 0.2):
    """:func:`until` for synchronous tests: call ``condition()`` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


async def create(jp_fetch, spec: dict | None = None, adapt: dict | None = None, **extra) -> str:
    """POST a cluster (202) of ``spec`` (default: one :data:`SMALL` worker); return its id without waiting."""
    body = {"spec": spec or {"groups": [SMALL]}, **extra}
    if adapt is not None:
        body["adapt"] = adapt
    _, cluster = await call(jp_fetch, "POST", "clusters", body=body, expect=202)
    return cluster["id"]


async def delete_and_wait(jp_fetch, cluster_id: str, timeout: float = 60) -> None:
    """DELETE a cluster (202) and wait until it has left the list (GET answers 404)."""
    await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    status = await wait_gone(jp_fetch, cluster_id, timeout)
    assert status == 404, f"cluster {cluster_id} was still listed {timeout:g} s after DELETE"


def slurm_unusable() -> str | None:
    """Why SLURM cannot be used here, or None when it can."""
    for command in ("sbatch", "squeue", "scancel", "sinfo"):
        if shutil.which(command) is None:
            return f"{command} is not on PATH (start a single-node SLURM with: bash ci/slurm/start-slurm.sh)"
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sinfo failed: {exc}"
    if done.returncode != 0:
        return f"SLURM does not answer (sinfo: {done.stderr.strip()}); start it with: bash ci/slurm/start-slurm.sh"
    states = done.stdout.split()
    if not any(s.rstrip("*~#!%$@^-") in ("idle", "mixed", "allocated", "completing") for s in states):
        return f"no usable SLURM node (sinfo states: {states})"
    return None


# Outside CI a machine without SLURM skips these; in CI (`make test` starts it) they run, and fail if it is missing.
_unusable = slurm_unusable()
requires_slurm = pytest.mark.skipif(
    _unusable is not None and not os.environ.get("CI"), reason=f"SLURM is not usable here: {_unusable}"
)


def slurm_jobs(prefix: str) -> dict[str, tuple[str, str, str]]:
    """job name -> (job id, state, reason) of the jobs ``squeue`` lists whose name starts with ``prefix``.

    Every test filters on its own cluster's prefix (``clustermgr-<cluster id>-``): the SLURM is shared
    with other tests (and other xdist workers), so nothing may assume the partition is empty.
    """
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i|%j|%T|%r"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    rows = (line.strip().split("|", 3) for line in out.splitlines() if line.strip())
    return {name: (job_id, state, reason) for job_id, name, state, reason in rows if name.startswith(prefix)}


async def squeue(prefix: str) -> dict[str, tuple[str, str]]:
    """job name -> (job id, state) of the listed jobs whose name starts with ``prefix`` (squeue runs in a thread)."""
    jobs = await asyncio.to_thread(slurm_jobs, prefix)
    return {name: (job_id, state) for name, (job_id, state, _) in jobs.items()}


def held_burst(client, n: int, name: str):
    """``n`` tasks that stay running until ``release.set()``: ``(futures, release)``; the futures' results are 0..n-1.

    For checking a state that the burst's end would change (an idle countdown starts once the tasks finish).
    ``client`` is asynchronous; ``name`` names the ``distributed.Event``, unique per cluster.
    """
    from distributed import Event

    release = Event(name, client=client)

    def held(i, event_name):
        from distributed import Event

        Event(event_name).wait(600)
        return i

    return client.map(held, range(n), event_name=release.name, pure=False), release


def running_with(n: int, group: str | None = None):
    """A predicate: the cluster runs with ``n`` workers (of ``group``), and none is still being stopped.

    A worker being retired leaves ``running`` at once, but stays in the scheduler, its job in the queue
    and its process alive until its stop has finished: ``stopping`` is 0 only then.
    """

    def predicate(cluster):
        if cluster["status"] != "running":
            return False
        counts = cluster["workers"]
        if group is not None:
            counts = next(g for g in counts["groups"] if g["name"] == group)
        return counts["running"] == n and counts["requested"] == n and counts.get("stopping", 0) == 0

    return predicate


def alive(pids) -> list[int]:
    """The PIDs that still exist and are not zombies."""
    result = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                result.append(pid)
        except psutil.NoSuchProcess:
            pass
    return result


def tree(pid: int) -> list[int]:
    """A process and all its descendants."""
    try:
        proc = psutil.Process(pid)
        return [pid] + [c.pid for c in proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def console_script(name: str, directory: Path) -> Path:
    """Write into ``directory`` the executable ``pip install`` makes for ``[project.scripts] name``.

    It runs this source tree (with :func:`subprocess_env`), whether or not the package is installed.
    """
    entry_point = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"][name]
    module, function = entry_point.split(":")
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n")
    path.chmod(0o755)
    return path


def subprocess_env(**extra: str) -> dict[str, str]:
    """This process's environment (the test server's runtime dir included) with this source tree importable."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return env


async def run(
    *command: str, env: dict[str, str], timeout: float = 180, cwd: Path | None = None
) -> tuple[int, str, str]:
    """Run a program without blocking the event loop (the test server runs on it): ``(code, stdout, stderr)``."""
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"{command} did not finish within {timeout} s") from None
    return process.returncode, stdout.decode(), stderr.decode()


def cluster_client(cluster: dict, **kwargs):
    """A ``distributed.Client`` for a cluster of the API (its JSON): the one way tests connect to a cluster.

    Clusters may require TLS with credentials of their own, so tests never build ``Client(address)`` by
    hand; they call this, which passes the cluster's ``Security`` along with ``kwargs``.

    For example, in an async test: ``async with cluster_client(cluster, asynchronous=True) as client: ...``
    """
    from distributed import Client

    from clustermgr_lab.client import cluster_security

    kwargs.setdefault("security", cluster_security(cluster))
    return Client(cluster["scheduler_address"], **kwargs)


async def assert_workers_closed_to_strangers(client, cluster: dict, dashboard_address: str | None) -> None:
    """Assert that every worker's own HTTP routes listen on loopback only, then :func:`assert_strangers_refused`.

    ``client`` is an asynchronous ``Client`` of the cluster (its certificate); the workers' HTTP sockets are read
    inside the workers themselves.
    """
    http = await client.run(
        lambda dask_worker: [s.getsockname()[:2] for s in dask_worker.http_server._sockets.values()]
    )
    worker_http = tuple(f"{host}:{port}" for sockets in http.values() for host, port in sockets)
    assert worker_http and all(address.startswith("127.0.0.1:") for address in worker_http), worker_http
    workers = tuple(client.scheduler_info()["workers"])
    await assert_strangers_refused(cluster, dashboard_address, workers, worker_http=worker_http)


async def assert_strangers_refused(
    cluster: dict,
    dashboard_address: str | None = None,
    workers: tuple[str, ...] = (),
    timeout: float = 3,
    worker_http: tuple[str, ...] = (),
) -> None:
    """Assert that a cluster's scheduler, workers and dashboard let in no one without the cluster's certificate.

    Tried against the scheduler: a plain ``Client`` (``tcp://`` to the same port), a TLS ``Client`` with a
    certificate of its own (trusting the cluster's CA, so only the scheduler can be the one refusing), and a
    bare TLS handshake without any certificate; against each of ``workers`` (their ``tls://`` addresses):
    a plain connection and a bare TLS handshake. Against the dashboard (``host:port``), when given: plain
    HTTP and HTTPS without a certificate; so against each of ``worker_http`` (``host:port`` of a worker's own
    HTTP routes, ``/health`` and ``/metrics``). Each must fail at the connection, with nothing of the cluster read.
    """
    import ssl

    from distributed import Client, Security
    from distributed.comm import connect

    address = cluster["scheduler_address"]
    assert address.startswith("tls://"), f"the scheduler listens on {address}, not on tls://"
    host, port = address.removeprefix("tls://").rsplit(":", 1)

    plain = address.replace("tls://", "tcp://", 1)
    with pytest.raises((OSError, asyncio.TimeoutError)):
        async with Client(plain, asynchronous=True, timeout=timeout):
            pass
    stranger = Security.temporary()
    stranger.tls_ca_file = cluster["tls"]["ca_file"]  # it trusts the cluster: the refusal is the scheduler's
    with pytest.raises((OSError, asyncio.TimeoutError)):
        async with Client(address, asynchronous=True, timeout=timeout, security=stranger):
            pass

    def no_certificate(target_host: str, target_port: int, request: bytes) -> bytes:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with (
            socket.create_connection((target_host, target_port), timeout=timeout) as raw,
            context.wrap_socket(raw) as conn,
        ):
            conn.sendall(request)
            return conn.recv(1024)  # TLS 1.3: the server's refusal arrives as an alert here

    for worker in workers:
        assert worker.startswith("tls://"), f"a worker listens on {worker}, not on tls://"
        with pytest.raises((OSError, asyncio.TimeoutError)):
            comm = await connect(worker.replace("tls://", "tcp://", 1), timeout=timeout)
            await comm.write({"op": "identity", "reply": True})
            await asyncio.wait_for(comm.read(), timeout)

    loop = asyncio.get_running_loop()
    targets = [(host, int(port), b"\x00" * 16)]
    targets += [(*w.removeprefix("tls://").rsplit(":", 1), b"\x00" * 16) for w in workers]
    if dashboard_address:
        targets.append((*dashboard_address.rsplit(":", 1), b"GET /status HTTP/1.0\r\n\r\n"))
    targets += [(*address.rsplit(":", 1), b"GET /health HTTP/1.0\r\n\r\n") for address in worker_http]
    for target_host, target_port, request in targets:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            answer = await loop.run_in_executor(None, no_certificate, target_host, int(target_port), request)
            if not answer:  # closed without an alert: refused just the same
                raise ConnectionResetError("closed")
    if dashboard_address:

        def plain_http() -> bytes:
            dashboard_host, dashboard_port = dashboard_address.rsplit(":", 1)
            with socket.create_connection((dashboard_host, int(dashboard_port)), timeout=timeout) as conn:
                conn.sendall(b"GET /status HTTP/1.0\r\n\r\n")
                try:
                    return conn.recv(4096)
                except ConnectionError:  # reset: refused
                    return b""

        answer = await loop.run_in_executor(None, plain_http)
        assert b"Bokeh" not in answer and b"200 OK" not in answer, answer[:200]
