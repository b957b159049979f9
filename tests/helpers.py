"""Shared test helpers: JSON calls through jp_fetch and waiting for a cluster state."""

from __future__ import annotations

import asyncio
import json
import time

import psutil
from tornado.httpclient import HTTPClientError


async def call(jp_fetch, method: str, *path: str, body=None, expect: int | None = None):
    """Call the API and return ``(status, json)``; HTTP errors are returned, not raised."""
    kwargs = {"method": method}
    if body is not None:
        kwargs["body"] = body if isinstance(body, (str, bytes)) else json.dumps(body)
    elif method in ("POST", "PATCH", "PUT"):
        kwargs["body"] = "{}"
    try:
        response = await jp_fetch("clustermgr", "api", *path, **kwargs)
        status, payload = response.code, response.body
    except HTTPClientError as exc:
        status, payload = exc.code, exc.response.body if exc.response else b""
    data = json.loads(payload) if payload else None
    if expect is not None:
        assert status == expect, (status, data)
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
