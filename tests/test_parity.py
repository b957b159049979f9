"""The server's rules give the answers of tests/parity_cases.json, the cases the sidebar's tests also read."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.limits import Limits
from clustermgr_lab.domain.spec import (
    WorkerGroup,
    WorkerSpec,
    parse_count,
    parse_size,
    parse_spec,
    parse_target,
    workers_for,
)

CASES = json.loads((Path(__file__).parent / "parity_cases.json").read_text())


def _named(cases: list[dict], key: str) -> list:
    return [pytest.param(case, id=repr(case[key])) for case in cases]


@pytest.mark.parametrize("case", _named(CASES["sizes"], "text"))
def test_sizes_read_as_the_sidebar_reads_them(case):
    # Given a size as typed in the sidebar, which sends it trimmed
    sent = case["text"].strip()
    allow_zero = case.get("allow_zero", False)
    if case["bytes"] is None:
        # When the server reads it, Then it refuses it, naming the field
        with pytest.raises(InvalidRequest) as refused:
            parse_size(sent, "memory", allow_zero=allow_zero)
        assert refused.value.field == "memory"
    else:
        # When the server reads it, Then it gets the bytes the sidebar previewed
        assert parse_size(sent, "memory", allow_zero=allow_zero) == case["bytes"]


@pytest.mark.parametrize("case", _named(CASES["counts"], "text"))
def test_counts_read_as_the_sidebar_reads_them(case):
    # Given the value the sidebar sends for a count typed in a group's field
    if case["value"] is None:
        # When the server reads it, Then it refuses it, naming the field
        with pytest.raises(InvalidRequest) as refused:
            parse_count(case["sent"], "count", minimum=case["minimum"])
        assert refused.value.field == "count"
    else:
        # When the server reads it, Then it gets the number the sidebar checked
        assert parse_count(case["sent"], "count", minimum=case["minimum"]) == case["value"]


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c['unit']}={c['amount']!r}") for c in CASES["workers_for"]])
def test_targets_need_the_workers_the_sidebar_previews(case):
    # Given a group and a scale target as the sidebar sends it
    group = WorkerGroup(name="g", count=0, threads=case["threads"], memory=parse_size(case["memory"], "memory"))
    target = parse_target({case["unit"]: case["sent"]})
    # When the server resolves the target, Then it asks for the workers the preview showed
    assert workers_for(group, target.unit, target.amount) == case["workers"]


# What the server's message says for each cap (Limits.check names no cap; its message does).
CAP_WORDS = {
    "max_cores": "cores in all",
    "max_memory": "of memory in all",
    "max_gpus": "GPUs in all",
    "gpus_per_worker": "per worker, but",
    "memory_per_worker": "per worker;",
}


@pytest.mark.parametrize("case", _named(CASES["caps"], "about"))
def test_caps_refuse_what_the_sidebar_warns_about(case):
    # Given a server's caps and a plan of worker groups
    limits = Limits(**case["caps"])
    spec = WorkerSpec(tuple(WorkerGroup(**group) for group in case["groups"]))
    check = functools.partial(limits.check, spec, "spec", groups_field=case.get("groups_field"))
    if case["refused"] is None:
        # When the server checks the plan, Then it takes it
        check()
    else:
        # When the server checks the plan, Then it refuses it for the cap the sidebar names, at the same field
        with pytest.raises(InvalidRequest) as refused:
            check()
        assert refused.value.field == case["refused"]["field"]
        assert CAP_WORDS[case["refused"]["cap"]] in refused.value.message


@pytest.mark.parametrize("case", _named(CASES["max_workers"], "counts"))
def test_the_worker_limit_refuses_what_the_sidebar_warns_about(case):
    # Given a plan of groups with these worker counts
    data = {
        "groups": [{"name": f"g{i}", "count": n, "threads": 1, "memory": "1 GiB"} for i, n in enumerate(case["counts"])]
    }
    if case["refused"]:
        # When the server reads it under its worker limit, Then it refuses it
        with pytest.raises(InvalidRequest) as refused:
            parse_spec(data, max_workers=case["max_workers"])
        assert refused.value.field == "spec.groups"
    else:
        # When the server reads it under its worker limit, Then it takes it
        assert parse_spec(data, max_workers=case["max_workers"]).total_workers == sum(case["counts"])
