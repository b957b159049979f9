"""Given a real Jupyter server, a notebook's ``clustermgr_lab.get_cluster`` is a ``distributed.deploy.Cluster``.

It computes through ``Client(cluster)``, scales through the server's one scale routine, sets the
server's adaptive range, reads the logs, lets go on ``close`` and stops the cluster on ``shutdown``;
what it shows follows the push stream (one subscriber, no request per read); refusals are Python
errors with the server's message and field, and change nothing.
"""

from __future__ import annotations

import signal
import sys
import textwrap
from urllib.parse import urlsplit

import psutil
import pytest
from distributed import Client
from distributed.deploy import Cluster

import clustermgr_lab
from clustermgr_lab.client import ClusterFailedError, ClusterManagerAPIError, JupyterServerCluster

from .helpers import call, delete_and_wait, run, running_with, subprocess_env, until, wait_for

SMALL = {"groups": [{"count": 1, "threads": 1, "memory": "256 MiB"}]}


@pytest.fixture
def jp_server_config(jp_server_config):
    """Besides the default templates, one whose clusters fail to start: a Cluster class given a protocol that is none."""
    jp_server_config["ClusterManager"]["templates"] = [
        {
            "name": "fails",
            "description": "LocalCluster over a protocol that does not exist",
            "backend": "cluster-class",
            "options": {
                "class": "distributed.LocalCluster",
                "kwargs": {"protocol": "nowhere", "n_workers": 0, "dashboard_address": "127.0.0.1:0"},
            },
            "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "256 MiB"}]},
        }
    ]
    return jp_server_config


@pytest.fixture
def server(jp_serverapp):
    """``(url, token, manager)`` of the test server (it runs on the test's event loop)."""
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    return jp_serverapp.connection_url, jp_serverapp.identity_provider.token, manager


@pytest.fixture
def requests_seen(jp_serverapp, monkeypatch):
    """Every HTTP request the server answers, as ``"METHOD path"``, in order."""
    seen: list[str] = []
    app = jp_serverapp.web_app
    log_request = app.log_request

    def counting(handler):
        seen.append(f"{handler.request.method} {handler.request.path}")
        log_request(handler)

    monkeypatch.setattr(app, "log_request", counting)
    return seen


async def test_a_cluster_object_is_a_dask_cluster_driven_through_the_server(server, jp_fetch, requests_seen):
    url, token, manager = server
    # Given a cluster of the server, running one worker
    _, made = await call(jp_fetch, "POST", "clusters", body={"name": "object", "spec": SMALL}, expect=202)
    cluster_id = made["id"]
    made = await wait_for(jp_fetch, cluster_id, running_with(1), what="1 running worker")
    subscribers = manager.feed.subscriber_count

    # When a notebook gets it by name, inside a running event loop
    cluster = await clustermgr_lab.get_cluster("object", asynchronous=True, url=url, token=token)

    # Then it is a distributed Cluster, following the server with exactly one stream subscriber
    assert isinstance(cluster, Cluster) and isinstance(cluster, JupyterServerCluster)
    assert manager.feed.subscriber_count == subscribers + 1
    assert (cluster.id, cluster.name) == (cluster_id, "object")
    assert cluster.scheduler_address == made["scheduler_address"] and cluster.scheduler_address.startswith("tls://")
    _, listed = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
    origin = urlsplit(url)  # dashboard_url is a path from the server's root (its base URL included)
    assert cluster.dashboard_link == f"{origin.scheme}://{origin.netloc}{listed['dashboard_url']}"
    assert len(cluster.scheduler_info["workers"]) == 1
    assert repr(cluster).startswith(f"JupyterServerCluster(object, '{made['scheduler_address']}', workers=1, threads=1")
    assert "object" in cluster._repr_html_() and cluster.dashboard_link in cluster._repr_html_()

    # And Client(cluster) computes on it with the cluster's TLS credentials, and links the proxied dashboard
    async with Client(cluster, asynchronous=True) as client:
        assert await client.submit(sum, [1, 2, 3]) == 6
        assert client.dashboard_link == cluster.dashboard_link

    # And reading what it shows sends no request: the state comes from the push stream
    before = len(requests_seen)
    for _ in range(50):
        repr(cluster), cluster._repr_html_(), cluster.dashboard_link, cluster.scheduler_info, cluster.state
    assert requests_seen[before:] == []

    # When it is scaled by memory, then by cores, then by workers in a named group
    await cluster.scale(memory="512 MiB")
    # Then each is one PATCH through the server's one scale routine, and the object follows the pushed workers
    assert requests_seen[before:] == [f"PATCH {origin.path}clustermgr/api/clusters/{cluster_id}"]
    await until(lambda: len(cluster.scheduler_info["workers"]) == 2, 120, "2 workers in scheduler_info")
    assert cluster.state["workers"]["running"] == 2
    await cluster.scale(cores=1)
    await until(lambda: len(cluster.scheduler_info["workers"]) == 1, 120, "1 worker in scheduler_info")
    await cluster.scale(2, group="default")
    await until(lambda: cluster.state["workers"]["running"] == 2, 120, "2 running workers pushed")
    _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    scales = [(e["before"], e["after"], e["source"]) for e in events["events"] if e["kind"] == "scale"]
    assert scales[-3:] == [(1, 2, "manual"), (2, 1, "manual"), (1, 2, "manual")]

    # When adaptive mode is set from the notebook, in Dask's words
    await cluster.adapt(minimum=1, maximum=3, interval="500ms", target_duration="2s")
    # Then it is the server's adaptive range (the sidebar's), and the object's widget status says so
    _, listed = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
    assert listed["adapt"]["groups"] == [{"group": "default", "minimum": 1, "maximum": 3, "unit": "workers"}]
    assert listed["adapt"]["interval"] == 0.5 and listed["adapt"]["target_duration"] == 2.0
    await until(lambda: cluster.state["adapt"] is not None, 30, "the adaptive range pushed")
    assert "Adaptive (default: 1 to 3 workers)" in cluster._scaling_status()
    widget = cluster._widget()
    assert widget is not None and "Adaptive" in widget.children[1].children[0].value
    # And a manual scale turns it off again, as in the sidebar
    await cluster.scale(1)
    await until(lambda: cluster.state["adapt"] is None, 30, "adaptive mode off, pushed")
    # And the widget's live status follows: one worker, manual scaling
    status, scaling = widget.children[0], widget.children[1].children[0]
    await until(lambda: "<strong>Workers:</strong> 1" in status.value, 120, "the widget showing 1 worker")
    await until(lambda: "Scaling mode: Manual" in scaling.value, 30, "the widget showing manual scaling")

    # When its logs are asked for
    logs = await cluster.get_logs()
    # Then they are the scheduler's and each worker's, as the server keeps them
    assert "distributed.scheduler" in logs["Scheduler"]
    worker_logs = [name for name in logs if name not in ("Scheduler", "Cluster")]
    assert worker_logs and all(logs[name] for name in worker_logs)
    assert "manual scale" in logs["Cluster"]

    # When the object is closed
    await cluster.close()
    # Then it let go: no stream subscriber left, and the cluster runs on
    await until(lambda: manager.feed.subscriber_count == subscribers, 30, "the stream subscriber gone")
    _, listed = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
    assert listed["status"] in ("running", "scaling")

    # When another object of it is shut down
    again = await JupyterServerCluster.from_name(cluster_id, asynchronous=True, url=url, token=token)
    await again.shutdown()
    # Then the cluster is gone from the server, and the object is closed
    status, _ = await call(jp_fetch, "GET", "clusters", cluster_id)
    assert status == 404 and again.status.name == "closed"
    assert manager.feed.subscriber_count == subscribers


async def test_refusals_are_python_errors_with_the_servers_message_and_change_nothing(server, jp_fetch):
    url, token, manager = server
    _, made = await call(jp_fetch, "POST", "clusters", body={"name": "strict", "spec": SMALL}, expect=202)
    cluster_id = made["id"]
    await wait_for(jp_fetch, cluster_id, running_with(1), what="1 running worker")

    # An unknown name
    with pytest.raises(ClusterManagerAPIError) as unknown:
        await clustermgr_lab.get_cluster("nobody", asynchronous=True, url=url, token=token)
    assert (unknown.value.code, str(unknown.value)) == ("not_found", "no cluster with id or name 'nobody'")

    cluster = await clustermgr_lab.get_cluster("strict", asynchronous=True, url=url, token=token)
    _, before = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
    # scale("lots"), both n and memory, nothing at all, and a bad adaptive range
    with pytest.raises(ClusterManagerAPIError) as lots:
        await cluster.scale("lots")
    assert (lots.value.status, lots.value.field) == (400, "scale.workers")
    assert str(lots.value) == "scale.workers: must be a whole number, not 'lots'"
    with pytest.raises(ClusterManagerAPIError) as both:
        await cluster.scale(3, memory="1TB")
    assert (both.value.status, both.value.field) == (400, "scale")
    assert str(both.value) == "scale: give exactly one of 'workers', 'cores' or 'memory'"
    with pytest.raises(ClusterManagerAPIError) as backwards:
        await cluster.adapt(minimum=3, maximum=1)
    assert (backwards.value.field, str(backwards.value)) == (
        "adapt.minimum",
        "adapt.minimum: minimum (3) is larger than maximum (1)",
    )
    # Then nothing changed on the server
    _, after = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
    assert (after["spec"], after["adapt"], after["last_decision"]) == (
        before["spec"],
        before["adapt"],
        before["last_decision"],
    )

    # A cluster that failed: its scheduler killed
    psutil.Process(manager.get(cluster_id).pids()["scheduler"]).send_signal(signal.SIGKILL)
    await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "failed", what="failed")
    await cluster.close()
    with pytest.raises(ClusterFailedError) as failed:
        await clustermgr_lab.get_cluster(cluster_id, asynchronous=True, url=url, token=token)
    _, listed = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
    assert str(failed.value) == f"cluster strict ({cluster_id}) failed: {listed['error']}"

    # A new cluster the server refuses, and one that fails to start: the server's reasons
    with pytest.raises(ClusterManagerAPIError) as refused:
        await clustermgr_lab.new_cluster(
            spec={"groups": [{"count": -1, "threads": 1, "memory": "256 MiB"}]}, asynchronous=True, url=url, token=token
        )
    assert refused.value.field == "spec.groups[0].count"
    with pytest.raises(ClusterFailedError) as not_started:
        await clustermgr_lab.new_cluster(template="fails", name="nowhere", asynchronous=True, url=url, token=token)
    assert str(not_started.value).startswith("cluster nowhere (")
    assert "failed: could not start the scheduler: distributed.LocalCluster(...) failed" in str(not_started.value)
    await delete_and_wait(jp_fetch, cluster_id)
    for cluster in (await call(jp_fetch, "GET", "clusters", expect=200))[1]["clusters"]:
        await delete_and_wait(jp_fetch, cluster["id"])
    assert manager.feed.subscriber_count == 0


SCRIPT = textwrap.dedent(
    """
    import clustermgr_lab
    from distributed import Client

    cluster = clustermgr_lab.new_cluster(spec={"groups": [{"count": 1, "threads": 1, "memory": "256 MiB"}]}, name="script")
    print("made", cluster)
    client = Client(cluster)
    print("sum", client.submit(sum, [1, 2, 3]).result())
    cluster.scale(2)
    client.wait_for_workers(2, timeout=120)
    print("workers", len(client.scheduler_info()["workers"]))
    client.close()
    cluster.shutdown()
    print("status", cluster.status.name)
    """
)


async def test_a_sync_object_works_in_a_plain_script(server, jp_fetch, tmp_path):
    url, token, _ = server
    # Given a plain Python script that creates a cluster from code (the sidebar's POST), computes, scales, stops it
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    # When it runs, told where the server is
    code, out, err = await run(sys.executable, str(script), env=subprocess_env(JUPYTER_URL=url, JUPYTER_TOKEN=token))
    # Then it did all of it with the synchronous object, and left nothing on the server
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("made JupyterServerCluster(script, 'tls://") and "workers=1" in lines[0]
    assert lines[1:] == ["sum 6", "workers 2", "status closed"]
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listed["clusters"] == []
