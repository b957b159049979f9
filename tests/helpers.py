"""Shared test helpers: API calls checked against the OpenAPI document, waiting for cluster states, running scripts."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import time
from pathlib import Path

import jsonschema
import psutil
from openapi_schema_validator import OAS31Validator, oas31_format_checker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from tornado.httpclient import HTTPClientError

from clustermgr_lab.openapi import openapi_document

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

API_PREFIX = ("clustermgr", "api")
DOCUMENT_URI = "urn:clustermgr-lab:openapi"
REPO = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def _document() -> dict:
    return openapi_document()


@functools.lru_cache(maxsize=1)
def _registry() -> Registry:
    return Registry().with_resource(DOCUMENT_URI, Resource.from_contents(_document(), default_specification=DRAFT202012))


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
        raise AssertionError(f"{what} does not match the OpenAPI document ({'/'.join(where)}):\n{details}\n{instance!r}")


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
    kwargs = {"method": method, "headers": headers}
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


def running_with(n: int, group: str | None = None):
    def predicate(cluster):
        if cluster["status"] != "running":
            return False
        if group is None:
            return cluster["workers"]["running"] == n and cluster["workers"]["requested"] == n
        g = next(g for g in cluster["workers"]["groups"] if g["name"] == group)
        return g["running"] == n and g["requested"] == n

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


async def run(*command: str, env: dict[str, str], timeout: float = 180, cwd: Path | None = None) -> tuple[int, str, str]:
    """Run a program without blocking the event loop (the test server runs on it): ``(code, stdout, stderr)``."""
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL, env=env,
        cwd=cwd,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"{command} did not finish within {timeout} s") from None
    return process.returncode, stdout.decode(), stderr.decode()
