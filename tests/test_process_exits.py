"""Given processes tracked by LocalProcesses, their exits are noticed without polling, adopted ones too."""

import asyncio
import subprocess
import sys

import pytest

from clustermgr_lab.backends.local.processes import LocalProcesses, TrackedProcess

SLEEPER = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1])); sys.exit(3)"]


def watched(tmp_path, poll_interval: float):
    exits: asyncio.Queue = asyncio.Queue()
    processes = LocalProcesses(tmp_path, on_exit=lambda name, code: exits.put_nowait((name, code)))
    processes.exit_poll_interval = poll_interval
    return processes, exits


async def test_a_started_process_that_ends_is_reported_with_its_code_at_once(tmp_path):
    # Given exits polled only once an hour
    processes, exits = watched(tmp_path, poll_interval=3600)
    # When a tracked process ends on its own after 0.5 s
    await processes.spawn("sleeper", [*SLEEPER, "0.5"])
    # Then its end and exit code are reported well before any poll, and it is no longer tracked
    assert await asyncio.wait_for(exits.get(), 10) == ("sleeper", 3)
    assert "sleeper" not in processes
    await processes.detach()


async def test_an_adopted_process_that_is_killed_is_reported(tmp_path):
    # Given a process this server did not start (as after a server restart), adopted from its record
    outsider = subprocess.Popen([*SLEEPER, "60"], start_new_session=True)
    try:
        record = TrackedProcess.of(outsider.pid)
        processes, exits = watched(tmp_path, poll_interval=3600)
        assert processes.adopt({"scheduler": {"pid": record.pid, "create_time": record.create_time}}) == {"scheduler"}
        # When it is killed
        outsider.kill()
        # Then its end is reported (the exit code of a process that is not our child is not known)
        assert await asyncio.wait_for(exits.get(), 10) == ("scheduler", None)
        assert processes.names() == []
    finally:
        outsider.kill()
        outsider.wait()


async def test_a_record_whose_pid_was_reused_is_not_adopted(tmp_path):
    # Given a record with the PID of a running process but another creation time
    outsider = subprocess.Popen([*SLEEPER, "60"], start_new_session=True)
    try:
        processes, _ = watched(tmp_path, poll_interval=3600)
        record = {"pid": outsider.pid, "create_time": TrackedProcess.of(outsider.pid).create_time - 100}
        # Then it is neither adopted nor given an exit descriptor
        assert processes.adopt({"scheduler": record}) == set()
        assert TrackedProcess.from_record(record).open_exit_fd() is None
    finally:
        outsider.kill()
        outsider.wait()


async def test_without_exit_descriptors_exits_are_polled(tmp_path, monkeypatch):
    # Given a platform without pidfd (as macOS): no process gets an exit descriptor
    monkeypatch.setattr(TrackedProcess, "open_exit_fd", lambda self: None)
    processes, exits = watched(tmp_path, poll_interval=0.1)
    # When a tracked process ends
    await processes.spawn("sleeper", [*SLEEPER, "0.2"])
    # Then the poll reports it
    assert await asyncio.wait_for(exits.get(), 10) == ("sleeper", 3)
    await processes.detach()


@pytest.mark.parametrize("how", ["stop", "release"])
async def test_a_process_stopped_or_released_by_us_is_not_reported_as_ended(tmp_path, how):
    # Given a tracked process
    processes, exits = watched(tmp_path, poll_interval=3600)
    tracked = await processes.spawn("sleeper", [*SLEEPER, "60"])
    # When we stop it, or release it to another owner that then stops it
    if how == "stop":
        await processes.stop("sleeper", timeout=5)
    else:
        processes.release("sleeper")
        tracked.signal_group(9)
        while tracked.running():
            await asyncio.sleep(0.05)
    # Then no exit is reported
    await asyncio.sleep(0.5)
    assert exits.empty()
    assert processes.names() == []
    await processes.detach()
