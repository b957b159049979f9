"""Given a local cluster whose worker process freezes (SIGSTOP: its nanny still runs), the scheduler stops hearing from
it, drops it after its ``worker-ttl`` and has the nanny replace it; the departure's cause says "connection-lost",
naming the worker, and the cluster goes on with a new worker process.

The scheduler's ``distributed.scheduler.worker-ttl`` (5 minutes by default) is made short through Dask's config
environment variable, which every process the server starts inherits.
"""

from __future__ import annotations

import os
from contextlib import suppress

import psutil
import pytest

from clustermgr_lab.domain.departures import from_nanny_log

from .helpers import call, cluster_client, create, delete_and_wait, until, wait_for

# distributed checks every worker-ttl and drops a worker silent for max(worker-ttl, 10 heartbeats of 0.5 s) = 5 s:
# shorter buys nothing, and a live worker's heartbeats (every 0.5 s) keep it well inside 5 s even under load.
WORKER_TTL = "5s"


@pytest.fixture
def short_worker_ttl(monkeypatch):
    """The schedulers the server starts from now on drop a worker they have not heard from for 5 s."""
    monkeypatch.setenv("DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL", WORKER_TTL)


# A worker's log (its nanny's lines and its own) when the scheduler, silent from it for its worker-ttl, had its nanny
# restart it (distributed 2026.8; the worker process was frozen: the nanny's "stop" went unanswered).
ADDRESS = "tls://127.0.0.1:40901"
TTL_RESTART = f"""\
2026-12-01 18:04:16,275 - distributed.worker - INFO -       Start worker at:      {ADDRESS}
2026-12-01 18:04:26,108 - distributed.nanny - INFO - Nanny asking worker to close. Reason: check-worker-ttl-1796148265.85
2026-12-01 18:04:30,111 - distributed.nanny - WARNING - Worker process still alive after 4.0 seconds, killing
2026-12-01 18:04:30,204 - distributed.nanny - INFO - Worker process 22619 was killed by signal 9
2026-12-01 18:04:30,232 - distributed.nanny - WARNING - Restarting worker (status=Status.running)
2026-12-01 18:04:30,531 - distributed.worker - INFO -       Start worker at:      tls://127.0.0.1:40737
"""


def test_a_restart_the_nanny_logs_as_the_schedulers_for_its_worker_ttl_is_a_lost_connection():
    # Given the log of a worker process the scheduler stopped hearing from, which its nanny then killed
    # When it is read for why the worker at ADDRESS went away
    kind, detail = from_nanny_log(TTL_RESTART, ADDRESS, 2**30)
    # Then it is a lost connection, with the kill that followed; not a SIGKILL of unknown origin
    assert (kind, detail) == (
        "connection-lost",
        f"the scheduler heard nothing from {ADDRESS} for longer than its worker-ttl (its process hung, frozen or cut "
        "off) and had its nanny restart it (worker process 22619 killed by signal 9 (SIGKILL))",
    )
    # And a worker process that answered the nanny's request and ended cleanly is a lost connection too
    answered = "\n".join(line for line in TTL_RESTART.splitlines() if "killed" not in line and "killing" not in line)
    assert from_nanny_log(answered, ADDRESS, None)[0] == "connection-lost"
    # And without that line, the same kill is a signal; the next incarnation's log says nothing of it
    plain = TTL_RESTART.replace("Reason: check-worker-ttl-", "Reason: nanny-restart-")
    assert from_nanny_log(plain, ADDRESS, None)[0] == "signal"
    assert from_nanny_log(TTL_RESTART, "tls://127.0.0.1:40737", None) is None


async def departures(jp_fetch, cluster_id: str) -> list[dict]:
    _, body = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    return [e for e in body["events"] if e.get("cause")]


async def worker_pids(client) -> dict[str, int]:
    """The PID of each connected worker's process, by address."""
    return await client.run(os.getpid, on_error="ignore")


async def test_a_frozen_worker_the_scheduler_drops_has_lost_its_connection_and_is_replaced(
    short_worker_ttl, jp_fetch, jp_serverapp
):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    # Given a running cluster of one worker, whose scheduler has the short worker-ttl
    spec = {"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "1 GiB"}]}
    cluster_id = await create(jp_fetch, spec=spec)
    frozen = None
    try:
        cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 1, 120, "1 worker")
        async with cluster_client(cluster, asynchronous=True) as client:
            assert await client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.worker_ttl) == 5.0
            ((address, pid),) = (await worker_pids(client)).items()
            # (the worker process is the nanny's child: the nanny is the process the backend started)
            nanny = manager.get(cluster_id).pids()["default-1"]
            frozen = psutil.Process(pid)
            assert frozen.ppid() == nanny

            # When the worker process (not its nanny) is frozen: it holds its connection but answers nothing
            frozen.suspend()

            # Then the scheduler drops it, and the departure's cause is a lost connection, naming the worker
            (event,) = await until(lambda: departures(jp_fetch, cluster_id), 120, "a departure")
            cause = event["cause"]
            assert (cause["kind"], cause["worker"], cause["group"]) == ("connection-lost", "default-1", "default")
            assert address in cause["detail"] and "worker-ttl" in cause["detail"], cause["detail"]
            assert event["message"].startswith(f"worker default-1 went away: {cause['detail']}"), event["message"]
            # And the frozen process is gone (its nanny killed it), replaced by a new one that connects
            await until(lambda: not frozen.is_running(), 60, "the frozen worker process to end")
            new = await until(lambda: worker_pids(client), 120, "a new worker process to connect")
            assert list(new.values()) != [pid] and address not in new
            assert await client.submit(sum, [1, 2], pure=False) == 3  # and it computes
        # And the card shows one running worker, and this departure as the last one; no other departure was told
        shown = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 1, 60, "1 worker again")
        assert shown["status"] == "running" and shown["workers"]["requested"] == 1
        assert shown["last_departure"] == event
        assert await departures(jp_fetch, cluster_id) == [event]
    finally:
        if frozen is not None:
            with suppress(psutil.NoSuchProcess):  # psutil refuses a PID reused by another process
                frozen.resume()
                frozen.kill()
        await delete_and_wait(jp_fetch, cluster_id, 60)
