"""Given a local template for many small workers (``nanny: false``, ``worker_config``), each worker is one process
that starts with that dask configuration; the default template keeps a nanny per worker; bad values are refused.
"""

from __future__ import annotations

import os

import psutil
import pytest
from traitlets import TraitError
from traitlets.config import Config

from clustermgr_lab.backends.local.backend import LocalBackend
from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.options import parse_backend_options

from .helpers import call, cluster_client, delete_and_wait, running_with, wait_for

QUIET = {
    "distributed.admin.tick.interval": "750ms",  # the server's own default for its processes is 1s
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.profile.enabled": False,
}
TWO = {"groups": [{"name": "default", "count": 2, "threads": 1, "memory": "256 MiB"}]}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [
        {"name": "nannies", "description": "the default shape", "backend": "local", "spec": TWO},
        {
            "name": "small",
            "description": "many small workers that mostly sleep",
            "backend": "local",
            "spec": TWO,
            "options": {"nanny": False, "worker_config": QUIET},
        },
    ]
    return jp_server_config


def _worker_processes(manager, cluster_id: str) -> dict[str, psutil.Process]:
    return {name: psutil.Process(pid) for name, pid in manager.get(cluster_id).pids().items() if name != "scheduler"}


def _in_worker():
    import dask.config

    keys = ("distributed.admin.tick.interval", "distributed.admin.system-monitor.interval")
    return os.getpid(), [dask.config.get(k) for k in keys], dask.config.get("distributed.worker.profile.enabled")


async def _started(jp_fetch, template: str) -> dict:
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": template}, expect=202)
    return await wait_for(jp_fetch, cluster["id"], running_with(2), timeout=90, what=f"2 workers of {template!r}")


async def test_workers_without_a_nanny_are_one_process_each_with_the_templates_dask_config(jp_fetch, jp_serverapp):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    # Given a cluster of the "small" template (no nanny, quiet intervals) and one of the default shape
    small = await _started(jp_fetch, "small")
    nannies = await _started(jp_fetch, "nannies")
    try:
        # When the workers are asked for their process and their dask configuration
        async with cluster_client(small, asynchronous=True) as client:
            answers = await client.run(_in_worker)
            assert await client.submit(sum, [1, 2, 3]) == 6  # and they compute
        tracked = _worker_processes(manager, small["id"])
        # Then each worker runs in the very process the server tracks: no nanny, no child
        assert sorted(pid for pid, _, _ in answers.values()) == sorted(p.pid for p in tracked.values())
        assert all(p.children() == [] for p in tracked.values())
        # And it started with the template's dask configuration
        assert {(tuple(intervals), profile) for _, intervals, profile in answers.values()} == {(("750ms", "5s"), False)}

        # While the default template's workers run under a nanny: the tracked process is not the worker
        async with cluster_client(nannies, asynchronous=True) as client:
            pids = {pid for pid, _, _ in (await client.run(_in_worker)).values()}
        tracked = _worker_processes(manager, nannies["id"])
        assert pids.isdisjoint(p.pid for p in tracked.values())
        assert pids == {child.pid for p in tracked.values() for child in p.children()}
    finally:
        await delete_and_wait(jp_fetch, small["id"])
        await delete_and_wait(jp_fetch, nannies["id"])
    # And stopping them leaves none of their processes
    assert not any(p.is_running() for p in tracked.values())


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"nanny": "no"}, "options.nanny", "true or false"),
        ({"worker_config": ["distributed.admin.tick.interval"]}, "options.worker_config", "dotted dask keys"),
        ({"worker_config": {"tick": "1s"}}, "options.worker_config.tick", "dotted dask key"),
        ({"worker_config": {"distributed.admin.tick.interval": None}}, "options.worker_config.", "string, number"),
        ({"worker_config": {"distributed.admin.tick.interval": "1s\nexport X=1"}}, "options.worker_config.", "line"),
    ],
)
def test_bad_small_worker_options_name_the_field_and_the_problem(options, field, words):
    # Given a template's options for the local backend that are wrong
    # When they are checked (as the server does at start)
    with pytest.raises(InvalidRequest) as refused:
        parse_backend_options(options, LocalBackend.template_options, "options")
    # Then the error names the field and what it must be
    assert refused.value.field.startswith(field)
    assert words in str(refused.value)


def test_a_site_wide_worker_config_is_checked_when_configured(tmp_path):
    # Given c.LocalBackend.worker_config with a key that is not a dotted dask key
    site = Config({"LocalBackend": {"worker_config": {"tick": "1s"}}})
    # Then the backend refuses it, naming the key's problem
    with pytest.raises(TraitError, match="dotted dask key"):
        LocalBackend("x", tmp_path, config=site)
