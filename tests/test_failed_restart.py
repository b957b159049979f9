"""Given a real Jupyter server: a cluster whose scheduler is killed says so with its true numbers (pushed), the
events that explain it travel on the stream, and it can be restarted with the same id, name and spec.
Templates say whether their backend can work here."""

import signal

import psutil
import pytest

from .helpers import call, delete_and_wait, running_with, wait_for
from .test_stream import StreamClient

ONE = {"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}]}


@pytest.fixture
def jp_server_config(jp_server_config):
    """Besides the default templates, one whose batch system is not installed here (LSF's bsub)."""
    jp_server_config["ClusterManager"]["templates"] = [
        {"name": "lsf-nowhere", "description": "LSF, not installed here", "backend": "lsf", "spec": ONE}
    ]
    return jp_server_config


async def test_a_killed_scheduler_fails_truthfully_and_the_cluster_restarts_as_it_was(
    jp_fetch, jp_ws_fetch, jp_serverapp
):
    # Given a running cluster of one worker, followed on the stream
    stream = await StreamClient.connect(jp_ws_fetch)
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"name": "phoenix", "spec": ONE}, expect=202)
    cluster_id = cluster["id"]
    await wait_for(jp_fetch, cluster_id, running_with(1), what="1 running worker")
    # And restarting it while it runs is refused
    status, refused = await call(jp_fetch, "POST", "clusters", cluster_id, "restart")
    assert status == 409 and refused["field"] == "status" and "running" in refused["message"]

    # When its scheduler is killed (SIGKILL)
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    psutil.Process(manager.get(cluster_id).pids()["scheduler"]).send_signal(signal.SIGKILL)

    # Then the stream's last word on it is failed with no worker, no core and the reason (not the numbers before)
    failed = await stream.wait_for(
        lambda m: (
            m.get("cluster", {}).get("id") == cluster_id
            and m["cluster"]["status"] == "failed"
            and m["cluster"]["workers"]["running"] == 0
        ),
        "the failed cluster with no running worker",
    )
    assert failed["cluster"]["resources"]["cores"] == 0 and failed["cluster"]["error"]
    # And the event that says why came on the stream with it
    pushed = [e for m in stream.messages if m.get("cluster", {}).get("id") == cluster_id for e in m.get("events", [])]
    assert any(e["message"] == failed["cluster"]["error"] for e in pushed)

    # When it is restarted
    _, restarted = await call(jp_fetch, "POST", "clusters", cluster_id, "restart", expect=202)
    # Then it is the same cluster (id, name, spec), pending, then running with its worker again
    assert (restarted["id"], restarted["name"], restarted["status"]) == (cluster_id, "phoenix", "pending")
    assert restarted["spec"] == cluster["spec"]
    await wait_for(jp_fetch, cluster_id, running_with(1), what="the restarted cluster's worker")
    # And its history kept what happened before, then says it restarted
    _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    messages = [e["message"] for e in events["events"]]
    assert failed["cluster"]["error"] in messages
    assert messages.index(failed["cluster"]["error"]) < messages.index("restarted: same name, Worker Spec and options")
    await delete_and_wait(jp_fetch, cluster_id)


async def test_templates_say_whether_their_backend_can_work_here(jp_fetch):
    # When the templates are listed
    _, body = await call(jp_fetch, "GET", "templates", expect=200)
    templates = {t["name"]: t for t in body["templates"]}
    # Then the local one is available, and the LSF one is not, saying which command is missing
    assert templates["local"]["available"] is True and templates["local"]["unavailable_reason"] is None
    assert templates["lsf-nowhere"]["available"] is False
    assert "bsub" in templates["lsf-nowhere"]["unavailable_reason"]
