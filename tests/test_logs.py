"""Given a running local cluster, its logs are listed, tailed and followed through the API, and a worker that goes
away leaves an event that says why (SIGKILL, the nanny's memory limit); a failed cluster's logs stay readable
until it is removed.

One cluster serves every step (real scheduler and workers in their own processes): its start-up is the
expensive part.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
from tornado.httpclient import AsyncHTTPClient

from clustermgr_lab.backends import SGEBackend
from clustermgr_lab.cluster.logs import read_from, tail
from clustermgr_lab.domain.departures import from_job_state, from_nanny_log, from_slurm_output

from .helpers import call, cluster_client, create, strict_json, until, validate_response, wait_for, wait_gone

MiB = 2**20
LIMIT = "400 MiB"


def test_tail_reads_only_the_end_of_a_file_and_read_from_continues_at_an_offset(tmp_path):
    # Given a log of 10 000 numbered lines
    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i}\n" for i in range(10_000)))
    # When its last 3 lines are asked for, with room for only 64 bytes
    chunk = tail(log, 3, max_bytes=64)
    # Then exactly those come back, with where they start and end in the file
    assert chunk.text == "line 9997\nline 9998\nline 9999\n"
    assert (chunk.end, chunk.size) == (log.stat().st_size, log.stat().st_size)
    assert log.read_bytes()[chunk.start : chunk.end].decode() == chunk.text
    # And a line longer than the budget comes back cut to the budget (as JSON: "\n" is 2), never the whole file
    log.write_text("x" * 100_000 + "\n")
    assert len(json.dumps(tail(log, 5, max_bytes=1000).text)) == 1000 + 2
    # When what follows an offset is read, and the file then shrinks (rotated)
    log.write_text("a\nb\n")
    assert read_from(log, 2).text == "b\n"
    assert read_from(log, 999).text == "a\nb\n"


def test_a_log_is_capped_by_its_encoded_size_and_never_read_through_a_link_or_a_fifo(tmp_path):
    # Given a log of 4 MiB of control bytes and invalid UTF-8 (each escaped in JSON as 6 bytes)
    log = tmp_path / "noisy.log"
    log.write_bytes((b"\x01\xff" * 63 + b"\n") * (4 * MiB // 127))
    # When its tail, and what follows its start, are read
    for chunk in (tail(log, 100_000), read_from(log, 0)):
        # Then each answer's text takes at most 4 MiB as JSON (24 MiB unbounded), and is not empty
        encoded = len(json.dumps(chunk.to_dict()))
        assert 3 * MiB < encoded <= 4 * MiB + 200, encoded / MiB
    # Given a symbolic link named like a log, to a file of this user, and a FIFO named like one
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0\n")
    (tmp_path / "link.log").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.log")
    # Then neither is read (the FIFO would block), and the backend does not list the link
    for name in ("link.log", "fifo.log"):
        for read in (lambda p: tail(p, 5), lambda p: read_from(p, 0)):
            with pytest.raises(FileNotFoundError):
                read(tmp_path / name)
    assert "link" not in SGEBackend("abc123", tmp_path).log_files()


def test_causes_are_read_from_nanny_lines_job_states_and_slurmstepd():
    address = "tcp://127.0.0.1:40001"
    earlier = "Worker process 11 was killed by signal 9\n"
    text = (
        f"{earlier}Start worker at: {address}\n"
        f"distributed.nanny.memory - WARNING - Worker {address} (pid=12) exceeded 95% memory budget. Restarting...\n"
        "distributed.nanny - INFO - Worker process 12 was killed by signal 15\n"
    )
    assert from_nanny_log(text, address, 400 * MiB) == (
        "memory-limit",
        "killed by its nanny: memory above 95% of its 400.00 MiB limit",
    )
    # an earlier incarnation's death is not this one's
    assert from_nanny_log(earlier + f"Start worker at: {address}\n", address, None) is None
    assert from_job_state("7", "CANCELLED by 1000", None, cancelled_by_us=False)[0] == "CANCELLED"
    assert from_job_state("7", "CANCELLED", None, cancelled_by_us=True) is None
    assert from_job_state("7", "TIMEOUT", "TimeLimit", cancelled_by_us=False) == (
        "TIMEOUT",
        "job 7 reached its walltime (TimeLimit)",
    )
    line = "slurmstepd: error: *** JOB 42 ON node1 CANCELLED AT 2026-12-01T14:00:00 DUE TO TIME LIMIT ***"
    # (slurmstepd's line says what SLURM's state would: the same words, whichever source answered)
    assert from_slurm_output(line) == ("TIMEOUT", "job 42 reached its walltime (slurmstepd)")
    assert from_slurm_output(line.replace("TIME LIMIT", "NODE FAILURE")) == (
        "NODE_FAIL",
        "job 42: its node failed (slurmstepd)",
    )
    assert from_slurm_output(line.replace(" DUE TO TIME LIMIT", "")) == (
        "CANCELLED",
        "job 42 was cancelled from outside this server (scancel or an administrator) (slurmstepd)",
    )
    assert from_slurm_output(line.replace("TIME LIMIT", "JOB REQUEUE")) == (
        "CANCELLED",
        "job 42 cancelled due to job requeue (slurmstepd)",
    )


async def get_log(server, cluster_id: str, raw: str) -> tuple[int, dict]:
    """GET ``clusters/{id}/logs/{raw}`` with ``raw`` sent as it is (query and escapes included); checked against the OpenAPI document."""
    port, base_url, auth = server
    response = await AsyncHTTPClient().fetch(
        f"http://localhost:{port}{base_url}clustermgr/api/clusters/{cluster_id}/logs/{raw}",
        headers=auth,
        raise_error=False,
    )
    data = strict_json(response.body)
    validate_response("GET", ("clusters", cluster_id, "logs", raw.split("?")[0]), response.code,
                      response.headers.get("Content-Type"), data)  # fmt: skip
    return response.code, data


async def departures(jp_fetch, cluster_id: str, kind: str) -> list[dict]:
    _, body = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    return [e for e in body["events"] if (e.get("cause") or {}).get("kind") == kind]


async def test_logs_are_tailed_followed_and_say_why_workers_went_away(
    jp_fetch, jp_ws_fetch, jp_serverapp, jp_http_port, jp_base_url, jp_auth_header
):
    server = (jp_http_port, jp_base_url, jp_auth_header)
    # Given a running cluster of two workers with a memory limit
    spec = {"groups": [{"name": "default", "count": 2, "threads": 1, "memory": LIMIT}]}
    cluster_id = await create(jp_fetch, spec=spec)
    cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 2, 120, "2 workers")

    # When its logs are listed
    _, listing = await call(jp_fetch, "GET", "clusters", cluster_id, "logs", expect=200)
    # Then the scheduler's comes first, then each worker's, with the worker's state
    logs = {entry["name"]: entry for entry in listing["logs"]}
    assert listing["logs"][0]["name"] == "scheduler" and listing["logs"][0]["worker"] is None
    assert {logs[n]["state"] for n in ("default-1", "default-2")} == {"running"}
    assert logs["default-1"]["group"] == "default" and logs["default-1"]["size"] > 0

    # When the scheduler's log is tailed
    _, chunk = await get_log(server, cluster_id, "scheduler?tail=3")
    # Then at most 3 lines come back, ending at the end of the file, and an offset reads on from there
    assert 0 < len(chunk["text"].splitlines()) <= 3 and chunk["offset"] == chunk["size"]
    _, rest = await get_log(server, cluster_id, f"scheduler?offset={chunk['offset']}")
    assert rest["start"] == chunk["offset"]

    # When a log is asked for by a name the cluster has no log of, or by a path
    for name in ("nope", "..", "..%2F..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", ".scheduler", "scheduler.log"):
        status, error = await get_log(server, cluster_id, name)
        # Then it is a JSON 404 naming the field, and nothing outside the cluster's logs is read
        assert (status, error["code"], error["field"]) == (404, "not_found", "name"), (name, error)
        assert "root:" not in json.dumps(error)
    # (a control character is refused too: tornado's own stripping would otherwise make it "not given")
    for bad in ("tail=0", "tail=lots", "offset=-1", "offset=%05", "tail=%05"):
        status, error = await get_log(server, cluster_id, f"scheduler?{bad}")
        assert (status, error["field"]) == (400, bad.split("=")[0])

    # When a worker's log is followed and the worker prints
    follow = await jp_ws_fetch(
        "clustermgr", "api", "clusters", cluster_id, "logs", "default-1", "follow", params={"tail": 5}
    )
    first = json.loads(await follow.read_message())
    assert first["type"] == "tail" and first["offset"] == first["size"]
    async with cluster_client(cluster, asynchronous=True) as client:
        await client.run(
            lambda: print("followed-marker", flush=True), workers=[await worker_address(client, "default-1")]
        )
        # Then the printed line arrives as it is written
        appended = ""
        while "followed-marker" not in appended:
            message = json.loads(await asyncio.wait_for(follow.read_message(), 30))
            assert message["type"] == "append" and message["start"] >= first["offset"]
            appended += message["text"]
        follow.close()

        # When worker default-1's processes are killed with SIGKILL
        manager = jp_serverapp.web_app.settings["clustermgr_manager"]
        os.killpg(manager.get(cluster_id).pids()["default-1"], signal.SIGKILL)
        # Then an event says it was killed by SIGKILL, with the cause's worker and group
        (killed,) = await until(lambda: departures(jp_fetch, cluster_id, "signal"), 60, "a departure by signal")
        assert killed["cause"]["worker"] == "default-1" and killed["cause"]["group"] == "default"
        assert "SIGKILL" in killed["cause"]["detail"] and killed["message"].startswith("worker default-1 went away")

        # When a task on default-2 allocates past its memory limit
        hog = client.submit(hold_memory, 600 * MiB, workers=[await worker_address(client, "default-2")], pure=False)
        # Then its nanny kills it, and the event says so with the limit
        found = await until(lambda: departures(jp_fetch, cluster_id, "memory-limit"), 90, "a memory-limit departure")
        await client.cancel(hog)
    assert found[0]["cause"]["worker"] == "default-2"
    assert "memory above 95% of its 400.00 MiB limit" in found[0]["cause"]["detail"]
    # And the card shows the last departure
    _, shown = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
    assert shown["last_departure"]["cause"]["kind"] in ("memory-limit", "signal", "connection-lost")

    # When the scheduler dies, the cluster fails: its logs stay readable, the worker that went away included
    os.killpg(manager.get(cluster_id).pids()["scheduler"], signal.SIGKILL)
    await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "failed", 60, "failed")
    _, listing = await call(jp_fetch, "GET", "clusters", cluster_id, "logs", expect=200)
    assert {e["name"]: e["state"] for e in listing["logs"]}["default-1"] == "gone"
    _, chunk = await get_log(server, cluster_id, "default-1?tail=50")
    assert "followed-marker" in chunk["text"]
    # And once it is removed, they are gone with it
    await call(jp_fetch, "DELETE", "clusters", cluster_id)
    assert await wait_gone(jp_fetch, cluster_id, 60) == 404
    await call(jp_fetch, "GET", "clusters", cluster_id, "logs", expect=404)


async def worker_address(client, name: str) -> str:
    info = await client.scheduler.identity()
    return next(address for address, w in info["workers"].items() if w["name"] == name)


def hold_memory(size: int) -> int:
    import time

    block = b"x" * size  # written, so resident
    time.sleep(60)
    return len(block)
