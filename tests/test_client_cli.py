"""Given a real Jupyter server, when scripts use the Python client or the clustermgr command, they manage its clusters."""

import asyncio
import datetime
import json
import os
import signal
import threading
import uuid

import pytest

from clustermgr_lab.client import (
    ClusterFailedError,
    ClusterManagerAPIError,
    ClusterManagerClient,
    ServerNotFoundError,
    WaitTimeout,
    discover,
)

from .helpers import (
    call,
    console_script,
    run,
    running_with,
    subprocess_env,
    validate_schema,
    validate_stream_message,
    wait_for,
)

SMALL = {"groups": [{"count": 1, "threads": 1, "memory": "256 MiB"}]}


@pytest.fixture
def server(jp_serverapp, jp_fetch, monkeypatch):
    """``(url, token)`` of the running test server; no JUPYTER_URL/JUPYTER_TOKEN in the environment."""
    monkeypatch.delenv("JUPYTER_URL", raising=False)
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    return jp_serverapp.connection_url, jp_serverapp.identity_provider.token


def schema(name):
    return ("components", "schemas", name)


# -- the Python client ----------------------------------------------------------------------------


def drive_a_cluster(url, token):
    """What a script does with the client, in a thread (the server runs on the test's event loop)."""
    manager = ClusterManagerClient(url, token)
    templates = manager.templates()
    for template in templates:
        validate_schema(template, *schema("Template"), what="template")
    assert {"local", "local-adaptive"} <= {t["name"] for t in templates}

    cluster = manager.create(name="scripted", spec=SMALL, wait=True)
    validate_schema(cluster, *schema("Cluster"), what="created cluster")
    assert running_with(1)(cluster)
    cluster_id = cluster["id"]

    changed = manager.scale(cluster_id, memory="512 MiB")
    assert changed["resolved"] == {"group": "default", "workers": 2, "cores": 2, "memory": 2**29, "gpus": 0}
    assert running_with(2)(manager.wait(cluster_id, running_with(2)))

    # (a minimum of 2, the workers it has: adaptive on for a moment must not shrink it before it is turned off)
    adaptive = manager.adapt(cluster_id, 2, 3)
    assert adaptive["adapt"]["groups"] == [{"group": "default", "minimum": 2, "maximum": 3, "unit": "workers"}]
    assert manager.adapt(cluster_id, group="default")["adapt"] is None  # one group off: here, the only one
    manager.adapt(cluster_id, 2, 3)
    assert manager.adapt(cluster_id)["adapt"] is None

    manager.rename(cluster_id, "renamed")
    assert manager.find("renamed")["id"] == cluster_id == manager.find(cluster_id)["id"]
    assert manager.set_spec(cluster_id, SMALL)["spec"]["groups"][0]["count"] == 1
    assert [c["id"] for c in manager.list()] == [cluster_id]
    assert manager.get(cluster_id)["name"] == "renamed"
    scales = [(e["before"], e["after"], e["source"]) for e in manager.events(cluster_id) if e["kind"] == "scale"]
    assert scales == [(1, 2, "manual"), (2, 1, "spec")]
    (today,) = manager.usage(days=1)
    validate_schema({"days": [today]}, *schema("UsageSummary"), what="usage")
    assert [c["id"] for c in today["clusters"]] == [cluster_id] and today["core_seconds"] > 0
    timeline = manager.timeline(cluster_id)
    validate_schema(timeline, *schema("Timeline"), what="timeline")

    # Refusals are typed errors carrying the server's code, message and field
    with pytest.raises(ClusterManagerAPIError) as refused:
        manager.scale(cluster_id, workers=-1)
    assert (refused.value.status, refused.value.code, refused.value.field) == (400, "invalid", "scale.workers")
    assert str(refused.value) == refused.value.message == "scale.workers: must be at least 0, not -1"
    for missing in (lambda: manager.get("nope"), lambda: manager.find("nobody"), lambda: manager.wait("nope")):
        with pytest.raises(ClusterManagerAPIError) as not_found:
            missing()
        assert (not_found.value.status, not_found.value.code) == (404, "not_found")
    with pytest.raises(WaitTimeout) as timeout:
        manager.wait(cluster_id, "failed", timeout=0.5)
    assert timeout.value.cluster["id"] == cluster_id and "was not failed within 0.5 s" in str(timeout.value)

    stopping = manager.delete(cluster_id, wait=True)
    assert stopping["status"] == "stopping"
    assert manager.list() == []


async def test_the_client_drives_a_cluster_through_its_life(server):
    await asyncio.to_thread(drive_a_cluster, *server)


async def test_the_client_finds_the_server_as_jupyter_server_list_does(server, jp_runtime_dir, tmp_path, monkeypatch):
    url, token = server
    # Given, next to the test server, the record of a server that does not answer
    (jp_runtime_dir / "jpserver-1.json").write_text(
        json.dumps({"url": "http://127.0.0.1:9/", "token": "x", "pid": os.getpid(), "port": 9, "sock": ""})
    )
    # When a client is made without a URL or a token
    found = await asyncio.to_thread(discover)
    manager = await asyncio.to_thread(ClusterManagerClient)
    # Then it talks to the server that answers, with that server's token
    assert found == (url, token)
    assert (manager.url, manager.token) == (url, token)
    assert await asyncio.to_thread(manager.list) == []

    # And with JUPYTER_URL and JUPYTER_TOKEN, it uses those
    monkeypatch.setenv("JUPYTER_URL", url)
    monkeypatch.setenv("JUPYTER_TOKEN", "wrong")
    with pytest.raises(ClusterManagerAPIError) as refused:
        await asyncio.to_thread(ClusterManagerClient().list)
    assert (refused.value.status, refused.value.code) == (403, "forbidden")

    # And with no server to find, it says so
    monkeypatch.delenv("JUPYTER_URL")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "empty"))
    with pytest.raises(ServerNotFoundError, match="found no running Jupyter server"):
        await asyncio.to_thread(ClusterManagerClient)


async def test_watch_yields_the_snapshot_then_each_change(server, jp_fetch):
    manager = ClusterManagerClient(*server)
    watching = threading.Event()

    def watch_until_added():
        messages = manager.watch(timeout=60)
        seen = [next(messages)]
        watching.set()
        while seen[-1]["type"] != "added":
            seen.append(next(messages))
        messages.close()
        return seen

    # Given a script watching the stream
    watcher = asyncio.ensure_future(asyncio.to_thread(watch_until_added))
    while not watching.is_set():
        await asyncio.sleep(0.01)
    # When a cluster is created
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"spec": SMALL}, expect=202)
    # Then the script got the snapshot, then the cluster added, pending
    seen = await asyncio.wait_for(watcher, 60)
    for message in seen:
        validate_stream_message(message)
    assert [m["type"] for m in seen] == ["snapshot", "added"]
    assert seen[1]["seq"] == seen[0]["seq"] + 1 and seen[1]["cluster"]["id"] == cluster["id"]


async def test_waiting_for_a_cluster_that_fails_says_why(server, jp_fetch, jp_serverapp):
    # Given a running cluster whose scheduler then dies
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"spec": SMALL}, expect=202)
    await wait_for(jp_fetch, cluster["id"], running_with(1), what="1 running worker")
    scheduler = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster["id"]).pids()["scheduler"]
    os.kill(scheduler, signal.SIGKILL)
    # When a script waits for it to grow, then it is told that it failed, and why
    with pytest.raises(ClusterFailedError, match="failed: lost the connection to the scheduler"):
        await asyncio.to_thread(ClusterManagerClient(*server).wait, cluster["id"], running_with(2), 60)


# -- a notebook ---------------------------------------------------------------------------------------


async def execute(jp_fetch, jp_ws_fetch, code, timeout=180):
    """Run ``code`` in a new python3 kernel of the test server; return its stdout (fails on an error)."""
    response = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": "python3"}))
    kernel_id = json.loads(response.body)["id"]
    channels = await jp_ws_fetch("api", "kernels", kernel_id, "channels")
    msg_id = uuid.uuid4().hex
    header = {
        "msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": uuid.uuid4().hex,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "version": "5.3",
    }  # fmt: skip
    content = {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False}
    message = {
        "header": header,
        "parent_header": {},
        "metadata": {},
        "content": content,
        "channel": "shell",
        "buffers": [],
    }
    await channels.write_message(json.dumps(message))
    stdout, errors = [], []
    try:
        while True:
            message = json.loads(await asyncio.wait_for(channels.read_message(), timeout))
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "stream":
                stdout.append(message["content"]["text"])
            elif message["msg_type"] == "error":
                errors.append("\n".join(message["content"]["traceback"]))
            elif message["msg_type"] == "execute_reply":
                break
    finally:
        channels.close()
        await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    assert not errors, errors
    return "".join(stdout)


async def test_a_notebook_gets_a_dask_client_by_name_in_one_call(server, jp_fetch, jp_ws_fetch, monkeypatch):
    # Given a cluster, and a kernel started by the server (it knows neither the URL nor the token)
    monkeypatch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"name": "for the notebook", "spec": SMALL}, expect=202)
    code = (
        "import clustermgr_lab\n"
        f"client = clustermgr_lab.connect({json.dumps(cluster['id'])})\n"
        "client.wait_for_workers(1, timeout=120)\n"
        "print('scheduler', client.scheduler.address, 'sum', client.submit(sum, [1, 2, 3]).result())\n"
        "client.close()\n"
    )
    # When the notebook connects by id in one call
    output = await execute(jp_fetch, jp_ws_fetch, code)
    # Then it computes on that cluster
    _, cluster = await call(jp_fetch, "GET", "clusters", cluster["id"], expect=200)
    assert f"scheduler {cluster['scheduler_address']} sum 6" in output


def inserted_cell(cluster_name: str) -> str:
    """The sidebar's inserted cell (src/clientcode.ts; src/__tests__/clientcode.spec.ts checks the same text)."""
    return "\n".join(
        [
            "import clustermgr_lab",
            "from distributed import Client",
            'if isinstance(globals().get("client"), Client):',
            "    client.close()  # the client of a cell inserted before",
            'if isinstance(globals().get("cluster"), clustermgr_lab.JupyterServerCluster):',
            "    cluster.close()  # lets go of the cluster of a cell inserted before; it keeps running",
            f"cluster = clustermgr_lab.get_cluster({json.dumps(cluster_name)})",
            "client = Client(cluster)",
            "cluster",
        ]
    )


async def test_the_inserted_cell_makes_the_cluster_object_and_replaces_the_previous_one(
    server, jp_serverapp, jp_fetch, jp_ws_fetch, monkeypatch
):
    # Given a cluster, and a kernel started by the server
    monkeypatch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"name": "dragged", "spec": SMALL}, expect=202)
    cell = inserted_cell(cluster["name"])
    # When the notebook runs the inserted cell, then runs it again (as after a second drag)
    code = (
        f"{cell}\n"
        "first_client, first_cluster = client, cluster\n"
        f"{cell}\n"
        "client.wait_for_workers(1, timeout=120)\n"
        "print('type', type(cluster).__name__, 'sum', client.submit(sum, [1, 2, 3]).result())\n"
        "print('previous', first_client.status, first_cluster.status.name)\n"
        "print('dashboard', client.dashboard_link == cluster.dashboard_link == cluster.state['dashboard_url'])\n"
        # what the server says on /metrics: one stream subscriber (the second object), not two
        "import requests\n"
        "url, token = clustermgr_lab.client.discover()\n"
        "metrics = requests.get(url + 'metrics', headers={'Authorization': 'token ' + token}, timeout=30).text\n"
        "print([line for line in metrics.splitlines() if line.startswith('clustermgr_stream_subscribers ')])\n"
        "client.close()\n"
        "cluster.close()\n"
    )
    output = await execute(jp_fetch, jp_ws_fetch, code)
    # Then the second run computes through a Cluster object, the first run's client and object were let go,
    # and the server has one stream subscriber: the object the notebook holds
    assert "type JupyterServerCluster sum 6" in output
    assert "previous closed closed" in output
    assert "dashboard True" in output  # in a kernel: a path on the browser's origin, the server's base URL included
    assert "['clustermgr_stream_subscribers 1.0']" in output
    # And the cluster runs on, with no stream subscriber left behind
    _, cluster = await call(jp_fetch, "GET", "clusters", cluster["id"], expect=200)
    assert cluster["status"] in ("running", "scaling")
    assert manager.feed.subscriber_count == 0


# -- the command line -----------------------------------------------------------------------------------


@pytest.fixture
def clustermgr(tmp_path, server):
    """Runs the ``clustermgr`` console script; returns ``(exit code, stdout, stderr)``."""
    (tmp_path / "bin").mkdir()
    script = console_script("clustermgr", tmp_path / "bin")

    async def clustermgr(*args, **env):
        return await run(script, *args, env=subprocess_env(**env))

    return clustermgr


async def test_the_command_line_manages_a_cluster(clustermgr, server):
    url, token = server
    auth = ("--url", url, "--token", token)

    code, out, _ = await clustermgr("templates", *auth)
    assert code == 0 and out.splitlines()[0].split() == ["NAME", "BACKEND", "WORKERS", "ADAPTIVE", "DESCRIPTION"]
    assert any(line.startswith("local-adaptive") and "0-4 workers" in line for line in out.splitlines())
    code, out, _ = await clustermgr("templates", "--json", *auth)
    for template in json.loads(out):
        validate_schema(template, *schema("Template"), what="template")

    # create, sized and waited for: global options after the command work too
    code, out, err = await clustermgr(
        "create", "--name", "cli", "--workers", "1", "--idle-timeout", "3600", "--wait", *auth
    )
    assert code == 0, err
    assert out.startswith("created cli (") and "running: 1/1 workers, 1 cores" in out

    code, out, _ = await clustermgr(*auth, "list")
    header, row = out.splitlines()
    assert header.split() == ["ID", "NAME", "STATUS", "WORKERS", "CORES", "MEMORY", "ADAPTIVE", "TEMPLATE"]
    assert row.split()[1:5] == ["cli", "running", "1/1", "1"]
    code, out, _ = await clustermgr("list", "--json", *auth)
    (cluster,) = json.loads(out)
    validate_schema(cluster, *schema("Cluster"), what="listed cluster")
    assert cluster["idle_timeout"] == 3600

    code, out, err = await clustermgr("scale", "cli", "--cores", "2", *auth)
    memory = 2 * cluster["spec"]["groups"][0]["memory"] / 2**30
    assert code == 0 and out.strip() == f"cli ({cluster['id']}): default -> 2 workers, 2 cores, {memory:.2f} GiB", (
        out,
        err,
    )
    code, out, _ = await clustermgr("adapt", cluster["id"], "--min", "1", "--max", "3", *auth)
    assert code == 0 and out.strip().endswith("adaptive default 1-3 workers")
    code, out, _ = await clustermgr("adapt", "cli", "--off", "--json", *auth)
    assert code == 0 and json.loads(out)["adapt"] is None

    code, out, _ = await clustermgr("events", "cli", *auth)
    lines = out.splitlines()
    assert lines[0].split() == ["TIME", "KIND", "GROUP", "CHANGE", "MESSAGE"]
    assert any("manual scale" in line and "2 cores: 1 -> 2" in line for line in lines), lines

    code, out, _ = await clustermgr("usage", "--days", "2", *auth)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["DAY", "(UTC)", "CLUSTER", "CORE-HOURS", "GPU-HOURS", "MEMORY-HOURS"]
    assert lines[1].split()[1] == "(all)" and lines[2].split()[:2] == ["cli", f"({cluster['id']})"]
    code, out, _ = await clustermgr("usage", "--days", "1", "--json", *auth)
    (today,) = json.loads(out)
    assert today["clusters"][0]["core_seconds"] > 0

    code, out, _ = await clustermgr("watch", "--count", "1", "--json", *auth)
    (snapshot,) = [json.loads(line) for line in out.splitlines()]
    validate_stream_message(snapshot)
    assert snapshot["type"] == "snapshot" and snapshot["clusters"][0]["name"] == "cli"

    code, out, _ = await clustermgr("delete", "cli", "--wait", *auth)
    assert code == 0 and out.strip() == f"cli ({cluster['id']}): stopped and removed"
    code, out, _ = await clustermgr("list", *auth)
    assert (code, out.strip()) == (0, "no clusters")


async def test_the_command_line_finds_the_server_and_says_what_went_wrong(clustermgr, server, tmp_path):
    url, token = server
    # Found as `jupyter server list` finds it
    code, out, err = await clustermgr("list", "--json")
    assert (code, json.loads(out)) == (0, []), err

    # The server's refusals, in its words, exit 1
    code, _, err = await clustermgr("scale", "nobody", "--workers", "1")
    assert code == 1 and err.strip() == "clustermgr: error: no cluster with id or name 'nobody'"
    code, _, err = await clustermgr("create", "--workers", "13")
    assert code == 1 and "scale.workers:" in err and "the limit is 12 per cluster" in err
    code, out, _ = await clustermgr("list", "--json")
    assert json.loads(out) == []  # the refused size left no cluster behind
    code, _, err = await clustermgr("list", "--url", url, "--token", "wrong")
    assert code == 1 and "not authenticated" in err

    # Bad usage exits 2
    code, _, err = await clustermgr("adapt", "x", "--off", "--min", "1")
    assert code == 2 and "give --min and --max, or --off" in err
    code, _, err = await clustermgr("scale", "x")
    assert code == 2 and "one of the arguments --workers --cores --memory is required" in err

    # No server to find exits 3
    code, _, err = await clustermgr("list", JUPYTER_RUNTIME_DIR=str(tmp_path / "empty"))
    assert code == 3 and "found no running Jupyter server" in err

    # A wait that times out exits 4
    code, _, err = await clustermgr("create", "--wait", "--timeout", "0.01")
    assert code == 4 and "was not running within 0.01 s" in err
