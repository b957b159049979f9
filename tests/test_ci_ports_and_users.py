"""The test run's own scripts: UI test servers take free ports, and the hub test's system users do not outlive the run.

``ci/ui_shards.py`` and ``ui-tests/playwright.config.js`` pick the port of each UI test server (never
``make lab``'s 8888); ``ci/hub/stop-hub.sh`` removes the users it created once their processes have exited, and
``ci/check-leftovers.sh`` fails a run that leaves a new system user or home folder behind.
"""

import contextlib
import importlib.util
import json
import os
import pwd
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="creates system users (make test runs as root)")


def _load_ui_shards():
    spec = importlib.util.spec_from_file_location("ui_shards", REPO / "ci" / "ui_shards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def port_8888_taken():
    """Something listens on 127.0.0.1:8888, as `make lab` does (this test's listener, or one there already)."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):  # taken already: as good
            listener.bind(("127.0.0.1", 8888))
            listener.listen()
        yield


def test_ui_shards_give_each_shard_a_free_port_not_8888(port_8888_taken, monkeypatch):
    """Given 8888 is taken, when the shard runner builds two shards' environments, each gets a free port of its own."""
    monkeypatch.delenv("UI_TEST_PORT", raising=False)
    shards = _load_ui_shards()
    ports = {shards.free_port() for _ in range(2)}
    envs = [shards.shard_command(k, 2, None, [], port)[1] for k, port in enumerate(sorted(ports), start=1)]
    given = [int(env["UI_TEST_PORT"]) for env in envs]
    assert 8888 not in given
    for port in given:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # free: nothing listens there


@pytest.mark.skipif(
    shutil.which("node") is None or not (REPO / "ui-tests" / "node_modules" / "@jupyterlab" / "galata").is_dir(),
    reason="needs node and ui-tests/node_modules (jlpm install in ui-tests)",
)
def test_playwright_config_without_a_port_picks_a_free_one(port_8888_taken):
    """Given no UI_TEST_PORT, when Playwright loads its configuration, the server's URL is on a free port, not 8888."""
    env = {k: v for k, v in os.environ.items() if k != "UI_TEST_PORT"}
    script = (
        "const c = require('./playwright.config.js');"
        "console.log(JSON.stringify({base: c.use.baseURL, server: c.webServer.url, env: process.env.UI_TEST_PORT}))"
    )
    out = subprocess.run(
        ["node", "-e", script], cwd=REPO / "ui-tests", env=env, capture_output=True, text=True, timeout=60, check=True
    )
    config = json.loads(out.stdout.strip().splitlines()[-1])
    port = int(config["env"])
    assert port != 8888
    assert config["base"] == f"http://127.0.0.1:{port}"
    assert config["server"] == f"http://127.0.0.1:{port}/lab"


def _user_exists(name: str) -> bool:
    return subprocess.run(["getent", "passwd", name], capture_output=True).returncode == 0


@pytest.fixture
def test_user():
    """A throwaway system user with a home (removed again whatever the test did)."""
    name = f"cmt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    yield name
    if _user_exists(name):
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        subprocess.run(["userdel", "--remove", name], capture_output=True)
    shutil.rmtree(f"/home/{name}", ignore_errors=True)


@needs_root
def test_check_leftovers_fails_on_a_user_the_run_created(tmp_path, test_user):
    """Given a snapshot before the user existed, when the run ends with it still there, the check fails naming it."""
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERMGR_TEST_RUN"} | {"LEFTOVER_GRACE": "0"}
    script = str(REPO / "ci" / "check-leftovers.sh")
    subprocess.run(["userdel", "--remove", test_user], check=True)
    subprocess.run(["bash", script, "snapshot", str(run_dir)], env=env, check=True, timeout=60)
    subprocess.run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", test_user], check=True)

    left = subprocess.run(["bash", script, "check", str(run_dir)], env=env, capture_output=True, text=True, timeout=120)

    assert left.returncode == 1
    assert f"system user {test_user}" in left.stderr
    assert f"home folder /home/{test_user}" in left.stderr
    subprocess.run(["userdel", "--remove", test_user], check=True)
    clean = subprocess.run(
        ["bash", script, "check", str(run_dir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert f"system user {test_user}" not in clean.stdout + clean.stderr


def _free_uid(low: int, high: int) -> int:
    taken = {entry.pw_uid for entry in pwd.getpwall()}
    return next(uid for uid in range(low, high) if uid not in taken)


@needs_root
@pytest.mark.parametrize("uid", ["system", "fixed"])
def test_check_leftovers_leaves_a_packages_system_user_alone(tmp_path, uid):
    """Given a snapshot, when a package installed during the run adds its system user (as Grid Engine's sgeadmin
    or exim's Debian-exim are added below uid 1000, or SLURM's slurm at Debian's fixed uid 64030), the check does
    not count that user: it belongs to the installed software."""
    run_dir = tmp_path / "run"
    name = f"cmp{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERMGR_TEST_RUN"} | {"LEFTOVER_GRACE": "0"}
    script = str(REPO / "ci" / "check-leftovers.sh")
    subprocess.run(["bash", script, "snapshot", str(run_dir)], env=env, check=True, timeout=60)
    chosen = [] if uid == "system" else ["--uid", str(_free_uid(64000, 65000))]  # Debian's fixed package uids
    subprocess.run(
        ["useradd", "--system", *chosen, "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True
    )
    try:
        checked = subprocess.run(
            ["bash", script, "check", str(run_dir)], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        subprocess.run(["userdel", name], capture_output=True)
    assert name not in checked.stdout + checked.stderr


@needs_root
def test_stop_hub_waits_for_a_users_exiting_processes_then_removes_the_user(tmp_path, test_user):
    """Given a created user whose last process is still exiting, when the hub is stopped, the user and home go."""
    state = tmp_path / "run" / "hub"
    state.mkdir(parents=True)
    (state / "created-users").write_text(f"{test_user}\n")
    # A process of the user that takes 2 s to end, as a user's server does after the hub stops it.
    exiting = subprocess.Popen(["runuser", "-u", test_user, "--", "sleep", "2"])
    time.sleep(0.3)
    try:
        stop = subprocess.run(
            ["bash", str(REPO / "ci" / "hub" / "stop-hub.sh"), str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        exiting.wait(timeout=30)

    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert f"removed user {test_user}" in stop.stdout
    assert not _user_exists(test_user)
    assert not Path(f"/home/{test_user}").exists()
