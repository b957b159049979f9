"""Worker Specs, scale targets and adaptive settings: parsing, validation and resolution (pure logic)."""

import pytest

from clustermgr_lab.domain.adaptive import AdaptivePolicy, Load, parse_adapt
from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.limits import Limits
from clustermgr_lab.domain.spec import parse_spec, parse_target, resolve_target

MiB, GiB = 2**20, 2**30
ONE_GROUP = {"groups": [{"name": "default", "count": 1, "threads": 2, "memory": "256 MiB"}]}
TWO_GROUPS = {
    "groups": [
        {"name": "cpu", "count": 0, "threads": 1, "memory": "1 GiB"},
        {"name": "gpu", "count": 0, "threads": 4, "memory": "8 GiB", "gpus": 1},
    ]
}


@pytest.mark.parametrize(
    "target, workers, cores, memory",
    [
        ({"workers": 3}, 3, 6, 768 * MiB),
        ({"cores": 5}, 3, 6, 768 * MiB),  # rounds up to whole workers
        ({"memory": "1GiB"}, 4, 8, 1 * GiB),
        ({"memory": 300 * MiB}, 2, 4, 512 * MiB),
        ({"memory": "1TB"}, 3726, 7452, 3726 * 256 * MiB),
        ({"workers": 0}, 0, 0, 0),
    ],
)
def test_targets_resolve_to_whole_workers(target, workers, cores, memory):
    resolution = resolve_target(parse_spec(ONE_GROUP), parse_target(target))
    assert (resolution.workers, resolution.cores, resolution.memory) == (workers, cores, memory)


def test_group_targets_need_a_group_name_when_there_are_several():
    spec = parse_spec(TWO_GROUPS)
    resolution = resolve_target(spec, parse_target({"cores": 6, "group": "gpu"}))
    assert (resolution.group, resolution.workers, resolution.gpus) == ("gpu", 2, 2)
    assert resolution.describe() == "2 workers · 8 cores · 16.00 GiB · 2 GPUs"
    with pytest.raises(InvalidRequest) as error:
        resolve_target(spec, parse_target({"workers": 1}))
    assert error.value.field == "scale.group" and "cpu, gpu" in error.value.message


@pytest.mark.parametrize(
    "spec, field, words",
    [
        ({"groups": []}, "spec.groups", "non-empty"),
        ({"groups": [{"threads": 0, "memory": "1GB"}]}, "spec.groups[0].threads", "at least 1"),
        ({"groups": [{"threads": 1, "memory": "-1GB"}]}, "spec.groups[0].memory", "positive size"),
        ({"groups": [{"threads": 1, "memory": 0}]}, "spec.groups[0].memory", "positive"),
        ({"groups": [{"threads": 1, "memory": "lots"}]}, "spec.groups[0].memory", "not a size"),
        ({"groups": [{"threads": "two", "memory": "1GB"}]}, "spec.groups[0].threads", "whole number"),
        ({"groups": [{"threads": True, "memory": "1GB"}]}, "spec.groups[0].threads", "whole number"),
        ({"groups": [{"threads": 1.5, "memory": "1GB"}]}, "spec.groups[0].threads", "whole number"),
        ({"groups": [{"threads": 1, "memory": "1GB", "count": -2}]}, "spec.groups[0].count", "at least 0"),
        ({"groups": [{"threads": 1, "memory": "1GB", "gpus": -1}]}, "spec.groups[0].gpus", "at least 0"),
        ({"groups": [{"memory": "1GB"}]}, "spec.groups[0].threads", "required"),
        ({"groups": [{"threads": 1, "memory": "1GB", "colour": "red"}]}, "spec.groups[0].colour", "unknown field"),
        (
            {"groups": [{"threads": 1, "memory": "1GB", "resources": {"GPU": 1}}]},
            "spec.groups[0].resources.GPU",
            "gpus",
        ),
        (
            {"groups": [{"threads": 1, "memory": "1GB", "resources": {"x": 0}}]},
            "spec.groups[0].resources.x",
            "positive",
        ),
        (
            {"groups": [{"name": "a", "threads": 1, "memory": "1GB"}, {"name": "a", "threads": 1, "memory": "1GB"}]},
            "spec.groups[1].name",
            "used twice",
        ),
        ({"groups": [{"name": "a b", "threads": 1, "memory": "1GB"}]}, "spec.groups[0].name", "letters"),
        ({"groups": [{"threads": 1, "memory": "1GB", "count": 13}]}, "spec.groups", "limit is 12"),
        ([], "spec", "must be an object"),
    ],
)
def test_invalid_specs_name_the_field(spec, field, words):
    with pytest.raises(InvalidRequest) as error:
        parse_spec(spec, max_workers=12)
    assert error.value.field == field
    assert words in error.value.message


@pytest.mark.parametrize(
    "target, field, words",
    [
        ({}, "scale", "exactly one"),
        ({"workers": 1, "cores": 2}, "scale", "exactly one"),
        ({"workers": -1}, "scale.workers", "at least 0"),
        ({"workers": "3"}, "scale.workers", "whole number"),
        ({"cores": None}, "scale.cores", "whole number"),
        ({"memory": "1 potato"}, "scale.memory", "not a size"),
        ({"memory": -5}, "scale.memory", "positive"),
        ({"workers": 2, "group": 7}, "scale.group", "group name"),
        ({"workers": 2, "nodes": 1}, "scale.nodes", "unknown field"),
    ],
)
def test_invalid_targets_name_the_field(target, field, words):
    with pytest.raises(InvalidRequest) as error:
        parse_target(target)
    assert error.value.field == field
    assert words in error.value.message


def test_targets_beyond_the_limit_are_refused():
    with pytest.raises(InvalidRequest) as error:
        resolve_target(parse_spec(ONE_GROUP), parse_target({"memory": "1TB"}), max_workers=12)
    assert error.value.field == "scale.memory" and "limit is 12" in error.value.message


def test_adapt_ranges_are_per_group_and_validated():
    spec = parse_spec(TWO_GROUPS)
    settings = parse_adapt({"group": "cpu", "minimum": "1 GiB", "maximum": "4.5 GiB", "unit": "memory"}, spec)
    settings = parse_adapt({"group": "gpu", "minimum": 0, "maximum": 8, "unit": "cores", "interval": 2}, spec, settings)
    assert [r.group for r in settings.ranges] == ["cpu", "gpu"]
    assert settings.ranges[0].worker_bounds(spec.groups[0]) == (1, 4)  # memory max rounds down
    assert settings.ranges[1].worker_bounds(spec.groups[1]) == (0, 2)
    assert settings.interval == 2

    for data, field in [
        ({"group": "cpu", "minimum": 3, "maximum": 1}, "adapt.minimum"),
        ({"group": "cpu", "minimum": 0, "maximum": 2, "unit": "nodes"}, "adapt.unit"),
        ({"group": "tpu", "minimum": 0, "maximum": 2}, "adapt.group"),
        ({"minimum": 0, "maximum": 2}, "adapt.group"),
        ({"group": "cpu", "minimum": 0, "maximum": 99}, "adapt.maximum"),
        ({"group": "cpu", "minimum": 0, "maximum": 2, "interval": 0}, "adapt.interval"),
        ({"group": "cpu", "minimum": 0, "maximum": 2, "wait_count": 0}, "adapt.wait_count"),
        ({"group": "cpu", "maximum": 2}, "adapt.minimum"),
        ("on", "adapt"),
    ]:
        with pytest.raises(InvalidRequest) as error:
            parse_adapt(data, spec, max_workers=12)
        assert error.value.field == field, data


def test_policy_grows_at_once_and_shrinks_only_after_wait_count_intervals():
    spec = parse_spec({"groups": [{"name": "default", "count": 1, "threads": 2, "memory": "1GB"}]})
    policy = AdaptivePolicy(parse_adapt({"minimum": 1, "maximum": 5, "wait_count": 3}, spec))
    members = {"default": ["default-1"]}

    proposals, _ = policy.propose(spec, Load(cores_wanted=7, ready=12), members)
    assert [(p.before, p.after) for p in proposals] == [(1, 4)]
    assert proposals[0].reason == "12 tasks queued, 5 s target duration"

    spec = spec.with_count("default", 4)
    idle = Load(cores_wanted=0, workers_holding_data=0)
    assert policy.propose(spec, idle, members)[0] == []
    assert policy.propose(spec, idle, members)[0] == []
    proposals, _ = policy.propose(spec, idle, members)
    assert [(p.before, p.after, p.reason) for p in proposals] == [(4, 1, "idle for 3 intervals (3 s)")]


def test_policy_reasons_count_in_singular_and_plural():
    # Given an adaptive group of 2-thread workers that shrinks after one low interval
    spec = parse_spec({"groups": [{"name": "default", "count": 0, "threads": 2, "memory": "1GB"}]})
    policy = AdaptivePolicy(parse_adapt({"minimum": 1, "maximum": 5, "wait_count": 1}, spec))
    # When one task is queued, Then the reason says "1 task" (as the sidebar shows it)
    proposals, _ = policy.propose(spec, Load(cores_wanted=1, ready=1), {"default": []})
    assert proposals[0].reason == "1 task queued, 5 s target duration"
    # And an idle group shrinks after "1 interval (1 s)", the interval in seconds
    spec = spec.with_count("default", 3)
    proposals, _ = policy.propose(spec, Load(cores_wanted=0, workers_holding_data=0), {"default": ["a", "b", "c"]})
    assert [p.reason for p in proposals] == ["idle for 1 interval (1 s)"]


def test_policy_holds_workers_that_keep_data_and_says_why():
    spec = parse_spec({"groups": [{"name": "default", "count": 2, "threads": 1, "memory": "1GB"}]})
    policy = AdaptivePolicy(parse_adapt({"minimum": 0, "maximum": 4, "wait_count": 1}, spec))
    proposals, notes = policy.propose(spec, Load(workers_holding_data=2), {"default": ["a", "b"]})
    assert proposals == []
    assert notes == [("default", "cannot shrink: workers hold data a client still references")]


@pytest.mark.parametrize(
    "spec, field, words",
    [
        ({"groups": [{"threads": 1, "memory": 10**400}]}, "spec.groups[0].memory", "at most 8 EiB"),
        ({"groups": [{"threads": 1, "memory": "1e30 TB"}]}, "spec.groups[0].memory", "at most"),
        ({"groups": [{"threads": 1, "memory": "1e400 GB"}]}, "spec.groups[0].memory", "not a size"),
        ({"groups": [{"threads": 1, "memory": ""}]}, "spec.groups[0].memory", "not a size"),
        ({"groups": [{"threads": 1, "memory": "GiB"}]}, "spec.groups[0].memory", "not a size"),
        ({"groups": [{"threads": 1, "memory": " kB "}]}, "spec.groups[0].memory", "not a size"),
        ({"groups": [{"threads": 10**400, "memory": "1GB"}]}, "spec.groups[0].threads", "at most 2147483647"),
        ({"groups": [{"threads": 1, "memory": "1GB", "count": 1e300}]}, "spec.groups[0].count", "at most"),
        (
            {"groups": [{"threads": 1, "memory": "1GB", "resources": {"x": 10**400}}]},
            "spec.groups[0].resources.x",
            "up to",
        ),
        # full matches: `$` alone lets a trailing newline through, which splits job scripts and command lines
        ({"groups": [{"name": "cpu\n", "threads": 1, "memory": "1GB"}]}, "spec.groups[0].name", "letters"),
        (
            {"groups": [{"threads": 1, "memory": "1GB", "resources": {"ssd\n": 1}}]},
            "spec.groups[0].resources.ssd\n",
            "not a valid",
        ),
        (
            {"groups": [{"name": f"g{i}", "threads": 1, "memory": "1GB"} for i in range(17)]},
            "spec.groups",
            "17 worker groups",
        ),
    ],
)
def test_numbers_too_large_sizes_without_a_number_and_names_with_newlines_are_refused(spec, field, words):
    with pytest.raises(InvalidRequest) as error:
        parse_spec(spec, max_workers=12, max_groups=16)
    assert error.value.field == field
    assert words in error.value.message


def test_huge_scale_targets_and_adapt_bounds_are_refused_not_overflowed():
    spec = parse_spec(ONE_GROUP)
    for target, field in [({"cores": 10**400}, "scale.cores"), ({"memory": 10**400}, "scale.memory")]:
        with pytest.raises(InvalidRequest) as error:
            parse_target(target)
        assert error.value.field == field and "at most" in error.value.message
    # the largest accepted amounts resolve exactly (no float in between) and then meet the worker limit
    assert resolve_target(spec, parse_target({"memory": 2**63 - 1})).workers == -(-(2**63 - 1) // (256 * MiB))
    with pytest.raises(InvalidRequest) as error:
        resolve_target(spec, parse_target({"cores": 2**31 - 1}), max_workers=12)
    assert error.value.field == "scale.cores" and "limit is 12" in error.value.message
    with pytest.raises(InvalidRequest) as error:
        parse_adapt({"minimum": 0, "maximum": 10**400, "unit": "memory"}, spec)
    assert error.value.field == "adapt.maximum"


def test_limits_refuse_plans_beyond_the_machine_and_the_server_caps():
    two = parse_spec(TWO_GROUPS).with_count("cpu", 3)
    limits = Limits(max_cores=4, max_memory=2 * GiB, gpus_per_worker=0, memory_per_worker=4 * GiB, where="this machine")
    for spec, field, words in [
        (two, "spec.groups[1].gpus", "asks for 1 GPU per worker, but this machine has 0 GPUs"),
        (parse_spec(ONE_GROUP).with_count("default", 3), "spec.groups", "6 cores in all; the limit is 4"),
        (
            parse_spec({"groups": [{"count": 3, "threads": 1, "memory": "1 GiB"}]}),
            "spec.groups",
            "3.00 GiB of memory in all; the limit is 2.00 GiB",
        ),
        (
            parse_spec({"groups": [{"threads": 1, "memory": "5 GiB"}]}),
            "spec.groups[0].memory",
            "this machine has 4.00 GiB",
        ),
    ]:
        with pytest.raises(InvalidRequest) as error:
            limits.check(spec, "spec.groups", groups_field="spec.groups")
        assert (error.value.field, words in error.value.message) == (field, True), error.value.message
    # a site that declares its GPUs gets them, as many as it has
    Limits(gpus_per_worker=1, max_gpus=2).check(two.with_count("gpu", 2), "spec.groups", groups_field="spec.groups")
    with pytest.raises(InvalidRequest) as error:
        Limits(gpus_per_worker=1, max_gpus=2).check(two.with_count("gpu", 3), "scale.workers")
    assert error.value.field == "scale.workers" and "3 GPUs in all" in error.value.message
