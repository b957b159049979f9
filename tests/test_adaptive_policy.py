"""Adaptive mode's default policy on bursty load: given sequences of load reports, the decisions (pure; no processes)."""

from __future__ import annotations

import asyncio

from clustermgr_lab.domain.adaptive import AdaptivePolicy, GradualPolicy, Load, parse_adapt
from clustermgr_lab.domain.spec import parse_spec
from clustermgr_lab.manager.settings import ClusterManagerSettings

from .helpers import until
from .test_adaptive_controller import controller

WORKERS = ["w0", "w1", "w2", "w3"]


def one_group(count: int):
    return parse_spec({"groups": [{"name": "default", "count": count, "threads": 1, "memory": "1GB"}]})


def decisions(policy: AdaptivePolicy, count: int, loads: list[Load]) -> list[tuple[int, int, str] | None]:
    """Feed ``loads`` one interval each, applying every proposal; the decision of each interval (or None)."""
    out = []
    spec = one_group(count)
    for load in loads:
        proposals, _ = policy.propose(spec, load, {"default": WORKERS[: spec.group("default").count]})
        if proposals:
            p = proposals[0]
            spec = spec.with_count("default", p.after)
            out.append((p.before, p.after, p.reason))
        else:
            out.append(None)
    return out


def test_a_burst_grows_at_once_is_held_while_queued_and_drains_as_workers_run_dry():
    # Given the default settings (wait_count 1) on an idle group of 0-4 workers
    policy = AdaptivePolicy(parse_adapt({"minimum": 0, "maximum": 4}, one_group(0)))
    all_busy = {w: 1 for w in WORKERS}
    # When a burst arrives, its queue shrinks below what 4 workers need in the target duration,
    # its last tasks run on 3 then 1 worker, and then nothing runs
    loads = [
        Load(cores_wanted=20, ready=100),
        Load(cores_wanted=2, ready=10, busy=all_busy),
        Load(cores_wanted=1, ready=1, busy=all_busy),
        Load(cores_wanted=1, ready=0, busy={"w0": 1, "w1": 1, "w2": 1}),
        Load(cores_wanted=1, ready=0, busy={"w0": 1}),
        Load(),
    ]
    # Then it grows to the maximum at once, keeps every worker while tasks wait for a thread,
    # and retires the workers that ran dry at the first interval that sees them idle
    assert decisions(policy, 0, loads) == [
        (0, 4, "100 tasks queued, 5 s target duration"),
        None,
        None,
        (4, 3, "1 worker idle, nothing queued, for 1 interval (1 s)"),
        (3, 1, "2 workers idle, nothing queued, for 1 interval (1 s)"),
        (1, 0, "idle for 1 interval (1 s)"),
    ]


def test_workers_that_run_tasks_are_never_retired_even_when_the_load_wants_fewer():
    # Given 4 workers, each running a long task, with nothing queued, and a patient setting
    policy = AdaptivePolicy(parse_adapt({"minimum": 0, "maximum": 4, "wait_count": 2}, one_group(4)))
    running = Load(cores_wanted=1, ready=0, busy={w: 1 for w in WORKERS})
    # When the load report says one core would do, interval after interval
    # Then no worker is retired (retiring a busy one would run its task again elsewhere)
    assert decisions(policy, 4, [running] * 5) == [None] * 5


def test_idle_workers_retire_down_to_those_the_held_data_needs_not_all_kept():
    # Given 4 idle workers, and results a client holds that the scheduler would keep on 1 of them
    policy = AdaptivePolicy(parse_adapt({"minimum": 0, "maximum": 4}, one_group(4)))
    held_on_one, held_on_four = Load(workers_holding_data=1), Load(workers_holding_data=4)
    # When the group idles, Then the 3 others retire (their data moves to the one kept), and no further
    assert decisions(policy, 4, [held_on_one, held_on_one]) == [
        (4, 1, "3 workers idle, 1 worker kept for held data, for 1 interval (1 s)"),
        None,
    ]
    # And when the data needs every worker, none retires, and the note says why
    proposals, notes = policy.propose(one_group(4), held_on_four, {"default": WORKERS})
    assert proposals == [] and notes == [("default", "cannot shrink: workers hold data a client still references")]


def test_wait_count_still_spaces_out_shrinking():
    # Given wait_count 3
    policy = AdaptivePolicy(parse_adapt({"minimum": 1, "maximum": 4, "wait_count": 3}, one_group(4)))
    # When the group is idle for 3 intervals, Then it shrinks to its minimum at the third
    assert decisions(policy, 4, [Load()] * 3) == [None, None, (4, 1, "idle for 3 intervals (3 s)")]


def test_only_the_group_the_tasks_need_grows():
    # Given a CPU group and a GPU group, both adaptive 0-2 and empty
    spec = parse_spec(
        {"groups": [{"name": "cpu", "count": 0, "threads": 1, "memory": "1GB"},
                    {"name": "gpu", "count": 0, "threads": 1, "memory": "1GB", "gpus": 1}]}
    )  # fmt: skip
    settings = parse_adapt({"group": "cpu", "minimum": 0, "maximum": 2}, spec)
    settings = parse_adapt({"group": "gpu", "minimum": 0, "maximum": 2}, spec, settings)
    policy = AdaptivePolicy(settings)
    members = {"cpu": [], "gpu": []}
    # When only tasks that need a GPU wait, Then only the GPU group grows
    proposals, _ = policy.propose(spec, Load(resource_demand={"GPU": 30}), members)
    assert [(p.group, p.after, p.reason) for p in proposals] == [("gpu", 2, "tasks need GPU")]
    # When only unrestricted tasks wait, Then only the CPU group grows
    proposals, _ = policy.propose(spec, Load(cores_wanted=9, ready=40), members)
    assert [(p.group, p.after) for p in proposals] == [("cpu", 2)]


async def test_a_wake_up_takes_the_next_step_at_once(tmp_path):
    # Given adaptive mode running with a one-minute interval
    adaptive, reconciler, reads = controller(tmp_path)
    adaptive.configure(adaptive.settings.__class__(ranges=adaptive.settings.ranges, interval=60.0), run=True)
    try:
        await until(lambda: adaptive._woken is not None, timeout=5, what="the loop")
        # When the scheduler pushes that work arrived
        adaptive.wake("tasks")
        # Then the load is read and the plan grows well before the interval ends
        await until(lambda: reconciler.spec.group("default").count == 6, timeout=5, what="the plan grown")
        assert len(reads) == 1
    finally:
        adaptive.stop()
        await asyncio.sleep(0)


async def test_new_settings_twice_in_a_row_leave_one_loop_that_still_wakes(tmp_path):
    # Given adaptive mode configured twice at once (two PATCHes, one per group), with a one-minute interval
    adaptive, reconciler, _ = controller(tmp_path, load={"cores_wanted": 0, "ready": 0})
    settings = adaptive.settings.__class__(ranges=adaptive.settings.ranges, interval=60.0)
    adaptive.configure(settings, run=True)
    try:
        await until(lambda: adaptive._woken is not None, timeout=5, what="the first loop")
        await asyncio.sleep(0.3)  # the first loop waits for a wake-up now
        adaptive.configure(settings, run=True)
        await asyncio.sleep(0.3)  # the first loop's clean-up has run by now
        # When work arrives, Then the running loop still has its wake-up and takes a step
        assert adaptive._woken is not None
        adaptive._read_load = _load_of({"cores_wanted": 6, "ready": 6})
        adaptive.wake("tasks")
        await until(lambda: reconciler.spec.group("default").count == 6, timeout=5, what="the plan grown")
    finally:
        adaptive.stop()
        await asyncio.sleep(0)


def _load_of(load: dict):
    async def read_load(target_duration: float) -> dict:
        return load

    return read_load


def test_a_site_config_naming_a_policy_by_its_former_path_still_works():
    # Given a site's config that names the gradual policy by its path before the package had layer folders
    settings = ClusterManagerSettings(adaptive_policy="clustermgr_lab.adaptive.GradualPolicy")
    # Then the same class is used, as with its path now
    assert settings.adaptive_policy is GradualPolicy
    assert ClusterManagerSettings(adaptive_policy="clustermgr_lab.domain.adaptive.GradualPolicy").adaptive_policy is (
        GradualPolicy
    )
