"""Given attach targets that are hostile or malformed peers (real processes), then the server stays up for everyone:
bad identities and huge frames fail only that cluster with a reason, nothing is unpickled, a peer's error text
reaches the API, the events and the command line without its escape sequences, and limits, ports and duplicates
are checked."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import requests

from .helpers import call, console_script, run, subprocess_env, wait_for
from .test_external import external_scheduler  # noqa: F401 - fixture

HOSTILE = Path(__file__).with_name("hostile_scheduler.py")


@pytest.fixture
def hostile(tmp_path):
    """Start a hostile peer in MODE; yields a function MODE -> its address. Every peer is killed afterwards."""
    processes: list[subprocess.Popen] = []

    def start(mode: str, marker: Path | None = None) -> str:
        port_file = tmp_path / f"{mode}.port"
        command = [sys.executable, str(HOSTILE), mode, str(port_file)] + ([str(marker)] if marker else [])
        process = subprocess.Popen(command, env=subprocess_env(), stdin=subprocess.DEVNULL)
        processes.append(process)
        deadline = time.monotonic() + 120
        while not port_file.exists():
            assert process.poll() is None and time.monotonic() < deadline, f"the {mode} peer did not start"
            time.sleep(0.05)
        return f"tcp://127.0.0.1:{port_file.read_text()}"

    yield start
    for process in processes:
        process.kill()
        process.wait()


async def attach_and_fail(jp_fetch, address: str) -> dict:
    status, cluster = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=202)
    return await wait_for(
        jp_fetch, cluster["id"], lambda c: c["status"] == "failed", what=f"failed attach of {address}"
    )


@pytest.mark.parametrize("mode, field", [("nthreads", "nthreads"), ("gpu-inf", "resources.GPU")])
async def test_a_malformed_identity_fails_that_cluster_with_its_reason_and_the_list_still_answers(
    jp_fetch, jp_ws_fetch, hostile, mode, field
):
    # Given a peer whose identity names a worker with nthreads "abc" (or GPU inf), and a stream subscriber
    address = hostile(mode)
    # When it is attached
    failed = await attach_and_fail(jp_fetch, address)
    # Then that cluster fails, saying which field was wrong
    assert field in failed["error"] and address in failed["error"], failed["error"]
    # And the list answers 200 for everyone, and the stream opens with its snapshot
    status, data = await call(jp_fetch, "GET", "clusters", expect=200)
    assert any(c["id"] == failed["id"] for c in data["clusters"])
    stream = await jp_ws_fetch("clustermgr", "api", "stream")
    try:
        snapshot = await asyncio.wait_for(stream.read_message(), 10)
        assert snapshot is not None and failed["id"] in snapshot, snapshot
    finally:
        stream.close()


async def test_a_huge_frame_is_refused_before_it_is_read(jp_fetch, hostile):
    # Given a peer that answers with a 1.5 GB length header and then really sends 256 MiB
    address = hostile("huge-frame")
    before = psutil.Process().memory_info().rss
    # When it is attached
    failed = await attach_and_fail(jp_fetch, address)
    # Then the attach fails naming the size, and this server's memory did not take the frame in
    grown = psutil.Process().memory_info().rss - before
    assert "1500000000 bytes" in failed["error"], failed["error"]
    assert grown < 100 * 2**20, f"the server grew by {grown / 2**20:.0f} MiB"


async def test_an_answer_of_millions_of_empty_maps_is_refused_with_memory_bounded_and_requests_answered(
    jp_fetch, jp_http_port, jp_base_url, jp_auth_header, hostile
):
    # Given a peer whose every answer is 32 MiB (within the size cap) of 33.5 million empty msgpack maps
    address = hostile("empty-maps")
    server = psutil.Process()  # pytest-jupyter runs the server in this process
    before = server.memory_info().rss
    # And a client in a thread of its own that asks for the list again and again
    watching, latencies, peak = threading.Event(), [], [before]

    def ask_again_and_again() -> None:
        url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}clustermgr/api/clusters"
        while not watching.is_set():
            started = time.monotonic()
            requests.get(url, headers=jp_auth_header, timeout=60).raise_for_status()
            latencies.append(time.monotonic() - started)
            peak.append(server.memory_info().rss)
            time.sleep(0.02)

    asker = threading.Thread(target=ask_again_and_again)
    asker.start()
    try:
        # When it is attached
        failed = await attach_and_fail(jp_fetch, address)
        await asyncio.sleep(0.5)
    finally:
        watching.set()
        await asyncio.get_running_loop().run_in_executor(None, asker.join)
    grown = (max(peak) - before) / 2**20
    print(f"32 MiB of empty maps: server RSS +{grown:.0f} MiB at most; slowest GET clusters {max(latencies):.2f} s")
    # Then the attach fails, saying why, and the server's memory grew by a bounded amount (+2.3 GiB unbounded)
    assert "more than 1000000 values" in failed["error"], failed["error"]
    assert grown < 200, f"the server grew by {grown:.0f} MiB"
    # And every request was answered meanwhile without a stall (seconds unbounded)
    assert len(latencies) > 5 and max(latencies) < 2, latencies


async def test_a_large_identity_is_read_less_often(jp_fetch, hostile, tmp_path):
    # Given a peer whose identity passes every check and is 26 MiB (256 workers with 1,300 strings nobody reads)
    calls = tmp_path / "calls"
    address = hostile("big-identity", calls)
    # When it is attached
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=202)
    await wait_for(
        jp_fetch, cluster["id"], lambda c: c["status"] == "running" and c["workers"]["running"] == 256, 60, "attached"
    )
    # Then it is polled about once per 26 s (a second per MiB), not every second, and costs little CPU
    server = psutil.Process()
    await asyncio.sleep(1)
    read_before, cpu_before, started = len(calls.read_text().splitlines()), server.cpu_times(), time.monotonic()
    await asyncio.sleep(20)
    cpu_after, elapsed = server.cpu_times(), time.monotonic() - started
    polls = len(calls.read_text().splitlines()) - read_before
    cpu = (cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system) / elapsed
    print(f"26 MiB identity: {polls} polls in {elapsed:.0f} s, server CPU {100 * cpu:.1f} % of a core")
    assert polls <= 1, polls
    assert cpu < 0.05, cpu
    await call(jp_fetch, "DELETE", "clusters", cluster["id"], expect=202)


async def test_a_pickled_value_from_a_peer_is_never_unpickled(jp_fetch, hostile, tmp_path):
    # Given a peer whose identity carries a pickle that would create a folder when unpickled
    marker = tmp_path / "unpickled"
    address = hostile("pickle", marker)
    # When it is attached
    failed = await attach_and_fail(jp_fetch, address)
    # Then it is refused (its id is no string), and the pickle never ran in this server
    assert "id" in failed["error"], failed["error"]
    assert not marker.exists()


async def test_a_silent_peer_fails_with_a_reason(jp_fetch, hostile):
    address = hostile("silent")
    failed = await attach_and_fail(jp_fetch, address)
    assert failed["error"] and "within" in failed["error"], failed["error"]


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:99999", "tcp://127.0.0.1:-1", "127.0.0.1:0"])
async def test_ports_outside_1_to_65535_are_refused(jp_fetch, address):
    status, body = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=400)
    assert body["field"] == "attach" and body["message"], body
    _, data = await call(jp_fetch, "GET", "clusters", expect=200)
    assert data["clusters"] == []


async def test_the_same_scheduler_is_listed_once_and_attached_clusters_count_in_max_clusters(
    jp_fetch,
    jp_serverapp,
    external_scheduler,  # noqa: F811
):
    address, _ = external_scheduler
    port = address.rsplit(":", 1)[1]
    # Given a scheduler attached by its IP
    _, first = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=202)
    await wait_for(jp_fetch, first["id"], lambda c: c["status"] == "running", what="attached")
    # When it is attached again as localhost: refused at once (the same address)
    status, body = await call(jp_fetch, "POST", "clusters", body={"attach": f"localhost:{port}"}, expect=409)
    assert body["field"] == "attach"
    # When it is attached by another name of this host: it fails, naming the cluster that lists it already
    other_name = f"tcp://{_another_local_address()}:{port}"
    _, second = await call(jp_fetch, "POST", "clusters", body={"attach": other_name}, expect=202)
    failed = await wait_for(jp_fetch, second["id"], lambda c: c["status"] == "failed", what="duplicate refused")
    assert "listed already" in failed["error"] and first["name"] in failed["error"], failed["error"]
    await call(jp_fetch, "DELETE", "clusters", second["id"], expect=202)
    # And with max_clusters 1, the attached cluster counts: a new cluster is refused
    jp_serverapp.web_app.settings["clustermgr_manager"].max_clusters = 1
    status, body = await call(jp_fetch, "POST", "clusters", body={"attach": "tcp://127.0.0.1:9"}, expect=409)
    assert "1 clusters" in body["message"], body
    status, body = await call(jp_fetch, "POST", "clusters", body={}, expect=409)


def _another_local_address() -> str:
    """Another name of the loopback scheduler: this host's name when it resolves to loopback, else 0.0.0.0 (Linux)."""
    name = socket.gethostname()
    try:
        if socket.gethostbyname(name).startswith("127."):
            return name
    except OSError:
        pass
    return "0.0.0.0"


UNPRINTABLE = ("\x1b", "\x07", "\r", "\u202e")


async def test_a_peers_error_text_is_shown_without_its_escape_sequences(
    jp_fetch, jp_serverapp, jp_http_port, jp_base_url, hostile, tmp_path
):
    # Given a peer that answers every call with an error text full of terminal escape sequences and line breaks
    address = hostile("escape-error")
    # When it is attached
    failed = await attach_and_fail(jp_fetch, address)
    # Then the cluster's error quotes the peer, with every control character shown escaped, on one line
    assert "\\x1b[31mred" in failed["error"] and "\\r\\nclustermgr: all fine" in failed["error"], failed["error"]
    assert not any(c in failed["error"] for c in (*UNPRINTABLE, "\n")), failed["error"]
    # And so do its events
    _, events = await call(jp_fetch, "GET", "clusters", failed["id"], "events", expect=200)
    quoted = [e["message"] for e in events["events"] if "pwned" in e["message"]]
    assert quoted and not any(c in m for m in quoted for c in (*UNPRINTABLE, "\n")), quoted

    # When the clustermgr command shows the cluster's events and the stream on a terminal
    (tmp_path / "bin").mkdir()
    script = console_script("clustermgr", tmp_path / "bin")
    auth = ("--url", f"http://127.0.0.1:{jp_http_port}{jp_base_url}", "--token", jp_serverapp.identity_provider.token)
    for command in (("events", failed["id"]), ("watch", "--count", "1")):
        code, out, err = await run(str(script), *auth, *command, env=subprocess_env())
        # Then what it prints quotes the peer escaped: no escape sequence reaches the terminal
        assert code == 0 and "pwned" in out, (command, code, out, err)
        assert not any(c in out + err for c in UNPRINTABLE), (command, out)
    await call(jp_fetch, "DELETE", "clusters", failed["id"], expect=202)
    # And when it attaches the peer itself and waits, its error message is escaped as well
    code, out, err = await run(str(script), *auth, "attach", address, "--wait", env=subprocess_env())
    assert code == 1 and "pwned" in err, (code, out, err)
    assert not any(c in out + err for c in UNPRINTABLE), err
