"""The server's rules give the answers of tests/parity_cases.json, the cases the sidebar's tests also read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustermgr_lab.errors import InvalidRequest
from clustermgr_lab.spec import WorkerGroup, parse_count, parse_size, parse_target, workers_for

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
