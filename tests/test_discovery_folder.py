"""Given hostile or broken files in the discovery folder, then discovery keeps working: each bad file is skipped with a
log line, nothing blocks or balloons, only this host's addresses are reached, and a flood of files stays bounded.
Given a user's own scheduler preload in their Dask config, then kernels of this server run it and the discovery preload."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clustermgr_lab.foreign.announcements import MAX_ANNOUNCEMENTS
from clustermgr_lab.foreign.discovery import PRELOAD_ENV

from .helpers import call, subprocess_env, until
from .test_discovery import listed, run_in_kernel, scheduler_address


async def discovery_folder(jp_serverapp) -> Path:
    """The folder this server's kernels announce in, watched as it is once a kernel has started."""
    app = next(iter(jp_serverapp.extension_manager.extension_apps["clustermgr_lab"]))

    async def a_kernel_was_given_the_folder() -> bool:
        return bool(app.discovery.kernel_variables(os.environ))  # what each kernel's start does

    await until(a_kernel_was_given_the_folder, 30, "discovery ready")
    assert app.discovery.watching
    return app.discovery.folder


@pytest.fixture
def child_scheduler(tmp_path):
    """A real scheduler process started under this (in-process) server, as a kernel's would be; yields (pid, address)."""
    scheduler_file = tmp_path / "scheduler.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
         "--no-dashboard", "--scheduler-file", str(scheduler_file)],
        env=subprocess_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (scheduler_file.exists() and scheduler_file.stat().st_size):
        assert process.poll() is None and time.monotonic() < deadline, "the scheduler did not start"
        time.sleep(0.1)
    yield process.pid, json.loads(scheduler_file.read_text())["address"]
    process.kill()
    process.wait()


def announce(folder: Path, name: str, data) -> Path:
    path = folder / name
    partial = path.with_suffix(".part")
    partial.write_text(data if isinstance(data, str) else json.dumps(data))
    partial.rename(path)
    return path


async def test_bad_announcement_files_are_skipped_and_a_good_one_is_still_listed(
    jp_fetch, jp_serverapp, child_scheduler, tmp_path, caplog
):
    caplog.set_level(logging.WARNING)
    pid, address = child_scheduler
    folder = await discovery_folder(jp_serverapp)
    await until(lambda: _exists(folder), 30, "the discovery folder created")
    # Given every kind of bad file at once
    announce(folder, "a-pid-text.json", {"address": address, "pid": "abc"})
    announce(folder, "a-pid-huge.json", {"address": address, "pid": 10**20})
    announce(folder, "a-not-object.json", "[1, 2]")
    announce(folder, "a-metadata.json", {"address": "tcp://169.254.169.254:80", "pid": pid})
    announce(folder, "a-ansi.json", {"address": address, "pid": pid, "notebook": "\x1b[2Jx\nFORGED log line"})
    announce(folder, "a-stranger.json", {"address": address, "pid": 1})  # init: not a kernel of this server
    os.mkfifo(folder / "a-fifo.json")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"address": address, "pid": pid}))
    (folder / "a-link.json").symlink_to(elsewhere)
    with open(folder / "a-huge.json", "wb") as huge:
        huge.truncate(300 * 2**20)  # sparse: 300 MB that cost no disk
    # When one good announcement follows them
    announce(folder, "z-good.json", {"address": address, "pid": pid, "notebook": "analysis.ipynb"})
    # Then the good one is listed, and nothing else
    await until(lambda: listed(jp_fetch, address), 30, "the good announcement listed")
    _, data = await call(jp_fetch, "GET", "clusters", expect=200)
    assert [c["name"] for c in data["clusters"]] == [f"analysis.ipynb {address.removeprefix('tcp://')}"], data
    # And each bad file got its log line, without its text unescaped in the log
    logged = "\n".join(r.getMessage() for r in caplog.records if "ignoring announcement file" in r.getMessage())
    for name in ("pid-text", "pid-huge", "not-object", "metadata", "ansi", "stranger", "fifo", "link", "huge"):
        assert f"a-{name}.json" in logged, (name, logged)
    assert "\x1b" not in logged and "FORGED" not in logged


async def test_a_flood_of_files_stays_bounded_and_the_list_stays_fast(jp_fetch, jp_serverapp, child_scheduler):
    pid, _ = child_scheduler
    folder = await discovery_folder(jp_serverapp)
    await until(lambda: _exists(folder), 30, "the discovery folder created")
    # Given 2,000 announcements naming 2,000 different loopback addresses (port 9: nothing listens, refused at once)
    for n in range(2000):
        address = f"tcp://127.0.{n // 250}.{n % 250 + 2}:9"
        (folder / f"{n}.json").write_text(json.dumps({"address": address, "pid": pid}))
    os.utime(folder)
    # When discovery has looked at the folder
    await until(lambda: _any_discovered(jp_fetch), 30, "discovery read the folder")
    # Then at most the bounded number of clusters is listed, and listing stays fast
    started = time.monotonic()
    _, data = await call(jp_fetch, "GET", "clusters", expect=200)
    elapsed = time.monotonic() - started
    assert len(data["clusters"]) <= MAX_ANNOUNCEMENTS, len(data["clusters"])
    assert elapsed < 3.0, f"listing took {elapsed:.2f} s"  # not probing 2,000 addresses; under load 15 a GET takes ~1 s


async def _exists(path: Path) -> bool:
    return path.is_dir()


async def _any_discovered(jp_fetch) -> bool:
    _, data = await call(jp_fetch, "GET", "clusters", expect=200)
    return bool(data["clusters"])


USER_PRELOAD = """
import os
def dask_setup(scheduler):
    with open(os.environ["USER_PRELOAD_MARKER"], "w") as out:
        out.write(scheduler.address)
"""


@pytest.fixture
def jp_server_config(jp_server_config, tmp_path, monkeypatch):
    """The user's own Dask config (a file in DASK_CONFIG) names a scheduler preload of theirs."""
    preload = tmp_path / "user_preload.py"
    preload.write_text(USER_PRELOAD)
    config = tmp_path / "dask-config"
    config.mkdir()
    (config / "mine.yaml").write_text(f"distributed:\n  scheduler:\n    preload:\n      - {preload}\n")
    monkeypatch.setenv("DASK_CONFIG", str(config))
    monkeypatch.setenv("USER_PRELOAD_MARKER", str(tmp_path / "user-preload-ran"))
    monkeypatch.delenv(PRELOAD_ENV, raising=False)
    return jp_server_config


async def test_the_users_own_scheduler_preload_still_runs_in_kernels(jp_fetch, jp_serverapp, tmp_path):
    # Given a kernel of this server, with the user's own preload configured in their Dask config
    kernel_id = await jp_serverapp.kernel_manager.start_kernel(kernel_name="python3")
    client = jp_serverapp.kernel_manager.get_kernel(kernel_id).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=120)
        # When the notebook starts a LocalCluster
        address = scheduler_address(
            await run_in_kernel(
                client,
                "from distributed import LocalCluster\n"
                "cluster = LocalCluster(n_workers=0, processes=False, protocol='tcp', host='127.0.0.1', dashboard_address=None)\n"
                "print(cluster.scheduler_address)",
            )
        )
        # Then the user's preload ran in its scheduler, and the server discovered it too
        marker = tmp_path / "user-preload-ran"
        assert marker.exists() and marker.read_text() == address
        await until(lambda: listed(jp_fetch, address), 30, "discovered")
    finally:
        client.stop_channels()
        await jp_serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)
