"""The worked example of docs/backends.md is a real backend: its code block runs a cluster end to end."""

from __future__ import annotations

import asyncio
import re
import types

from clustermgr_lab.backends import BACKENDS
from clustermgr_lab.backends.base import Backend, BackendContext
from clustermgr_lab.cluster.managed import ManagedCluster
from clustermgr_lab.domain.spec import parse_spec, parse_target, resolve_target

from .helpers import REPO, alive

MARK = "<!-- toy backend: tests/test_docs_backend.py runs this block -->"


def toy_backend_source() -> str:
    """The python block right after the marker in docs/backends.md."""
    text = (REPO / "docs" / "backends.md").read_text()
    match = re.search(re.escape(MARK) + r"\s*```python\n(.*?)\n```", text, re.S)
    assert match, f"docs/backends.md has no python block after {MARK!r}"
    return match.group(1)


def load_toy_backend() -> type[Backend]:
    module = types.ModuleType("docs_toy_backend")
    exec(compile(toy_backend_source(), "docs/backends.md", "exec"), module.__dict__)
    return module.SubprocessBackend


async def until(condition, what: str, timeout: float = 120) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_the_docs_toy_backend_runs_scales_and_closes_a_cluster(tmp_path):
    # Given the backend of the docs' worked example, registered as the docs say
    backend_class = load_toy_backend()
    try:
        assert BACKENDS["subprocess"] is backend_class
        cluster = ManagedCluster(
            "toy1", "Toy", "children", lambda context: backend_class("toy1", context),
            parse_spec({"groups": [{"count": 2, "threads": 1, "memory": "256 MiB"}]}),
            on_change=lambda cluster: None, max_workers=8, context=BackendContext(tmp_path / "toy1"),
        )  # fmt: skip
        # When a cluster starts on it
        await cluster.start()
        # Then its scheduler runs and both workers connect
        assert cluster.lifecycle == "running", cluster.error
        await until(lambda: cluster.worker_counts()["running"] == 2, "two workers to connect")
        assert cluster.to_dict()["capabilities"]["readoptable"] is False
        pids = list(cluster.pids().values())
        assert len(pids) == 3
        # When it is scaled down to one worker
        cluster.scale(resolve_target(cluster.spec, parse_target({"workers": 1})))
        # Then one worker is retired and stopped
        await until(
            lambda: (c := cluster.worker_counts())["running"] == 1 and c["requested"] == 1 and c["stopping"] == 0,
            "the cluster to settle at one worker",
        )
        assert len(cluster.pids()) == 2
        # When it is closed
        await cluster.close()
        # Then it is stopped and none of its processes is left
        assert cluster.lifecycle == "stopped"
        await until(lambda: not alive(pids), "every process to be gone", timeout=30)
    finally:
        BACKENDS.pop("subprocess", None)
