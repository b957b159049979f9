"""The adaptive controller and its policies on their own: a fake load, a fake backend, no processes."""

from __future__ import annotations

from clustermgr_lab.backends.base import BackendContext
from clustermgr_lab.cluster.adaptive_loop import AdaptiveController
from clustermgr_lab.cluster.managed import ManagedCluster
from clustermgr_lab.domain.adaptive import AdaptivePolicy, GradualPolicy, Proposal, parse_adapt
from clustermgr_lab.domain.spec import parse_spec
from clustermgr_lab.manager.cluster_manager import ClusterManager

from .test_reconciler import FakeBackend, make

BUSY = {"cores_wanted": 6, "ready": 6}


def controller(tmp_path, policy_class=AdaptivePolicy, load=BUSY, maximum=8):
    reconciler, backend, _, _ = make(tmp_path, count=0)
    reads: list[float] = []

    async def read_load(target_duration: float) -> dict:
        reads.append(target_duration)
        return load

    adaptive = AdaptiveController(
        "c1", reconciler, reconciler.events, read_load, is_running=lambda: True, on_change=lambda: None,
        policy_class=policy_class,
    )  # fmt: skip
    adaptive.configure(parse_adapt({"minimum": 0, "maximum": maximum}, reconciler.spec), run=False)
    return adaptive, reconciler, reads


async def test_a_step_reads_the_load_and_sets_the_plan_the_policy_proposes(tmp_path):
    # Given adaptive mode 0-8 workers and a scheduler that wants 6 cores
    adaptive, reconciler, reads = controller(tmp_path)
    # When the controller takes one step
    await adaptive.step()
    # Then the load was read with the settings' target duration and the plan grew at once, from adaptive mode
    assert reads == [adaptive.settings.target_duration]
    assert reconciler.spec.group("default").count == 6
    assert reconciler.plan_source["default"] == "adaptive"


async def test_the_gradual_policy_grows_one_worker_per_interval(tmp_path):
    # Given the gradual policy and the same load
    adaptive, reconciler, _ = controller(tmp_path, policy_class=GradualPolicy)
    # When the controller takes three steps
    for _ in range(3):
        await adaptive.step()
    # Then the plan grew by one worker each time
    assert reconciler.spec.group("default").count == 3
    assert "growing by 1 per interval" in reconciler.events.last_decision.message


async def test_any_policy_object_can_drive_the_plan(tmp_path):
    # Given a policy of our own that always asks for exactly two workers
    class Two:
        def __init__(self, settings):
            self.settings = settings

        def propose(self, spec, load, members):
            count = spec.group("default").count
            return ([Proposal("default", count, 2, "always two")] if count != 2 else []), [("default", "holding")]

    adaptive, reconciler, _ = controller(tmp_path, policy_class=Two)
    # When it steps twice
    await adaptive.step()
    await adaptive.step()
    # Then its proposal became the plan once, and its note was recorded once
    assert reconciler.spec.group("default").count == 2
    notes = [e for e in reconciler.events if e.kind == "note"]
    assert [n.message for n in notes] == ["holding"]


async def test_a_group_that_failed_to_grow_is_not_grown_again(tmp_path):
    # Given a group whose last launch was refused
    adaptive, reconciler, _ = controller(tmp_path)
    reconciler.group_errors["default"] = "sbatch: invalid partition"
    # When the policy wants it bigger
    await adaptive.step()
    # Then the plan stays and the reason is noted
    assert reconciler.spec.group("default").count == 0
    assert any("not growing: sbatch: invalid partition" in e.message for e in reconciler.events)


def test_the_policy_is_chosen_by_config(tmp_path):
    # Given a server configured with the gradual policy, by its import name
    manager = ClusterManager(
        workdir=str(tmp_path / "work"),
        store_path=str(tmp_path / "clusters.sqlite3"),
        adaptive_policy="clustermgr_lab.domain.adaptive.GradualPolicy",
    )
    try:
        # When one of its clusters turns adaptive mode on
        cluster = manager._new_cluster(
            "c1", "Cluster 1", "local", lambda context: FakeBackend("c1", context),
            parse_spec({"groups": [{"count": 0, "threads": 1, "memory": "1 GiB"}]}), BackendContext(tmp_path / "c1"),
        )  # fmt: skip
        assert isinstance(cluster, ManagedCluster)
        cluster.adaptive.configure(parse_adapt({"minimum": 0, "maximum": 4}, cluster.spec), run=False)
        # Then its controller follows the configured policy
        assert type(cluster.adaptive.policy) is GradualPolicy
    finally:
        manager.store.close()
