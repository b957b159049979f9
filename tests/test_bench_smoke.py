"""Given ``benchmarks/bench.py --smoke``, the benchmark runs end to end, writes well-formed rows and leaves no process."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO

ROW_KEYS = {"name", "value", "unit", "target", "pass"}
# what a full run of bench.py measures, in order (bench.PARTS); the smoke run leaves out the two with servers or a
# test bed of their own, which the tests below and test_multihost.py run
SMOKE_PARTS = ["footprint", "growth", "lifecycle", "tls", "side-by-side", "many-clusters", "log-tail", "bursty",
               "bursty-data", "many-workers"]  # fmt: skip


def run_bench(*args: str, timeout: float) -> subprocess.CompletedProcess:
    """``benchmarks/bench.py`` with ``args``, from the repository, its output captured."""
    command = [sys.executable, str(REPO / "benchmarks" / "bench.py"), *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)


# Jupyter servers, LocalClusters and clusters, one after another: 2.5 min on a quiet machine, 9 min beside two
# busy loops on 2 cores (549 s, 2026-12-06). The run's own deadline (900 s) decides; the suite's timeout stays above it.
@pytest.mark.timeout(960)
def test_bench_smoke_writes_rows_with_their_verdicts_and_leaves_no_process(tmp_path):
    # Given the smoke mode of the benchmark (small: 1 repetition, 10 clusters, 5 subscribers)
    out = tmp_path / "rows.json"
    # When it runs (its exit code is non-zero if any process it started is still there at the end)
    result = run_bench("--smoke", "--no-chart", "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # And its folder (servers' logs, work folders) is gone with it: kept only when a run fails
    folder = re.search(r"tmp=(\S+),", result.stdout)
    assert folder and not Path(folder.group(1)).exists(), result.stdout[:2000]
    # Then every row is {name, value, unit, target, pass}, with pass = value <= target where there is a target
    rows = json.loads(out.read_text())
    for row in rows:
        assert ROW_KEYS | {"part"} <= set(row) <= ROW_KEYS | {"part", "note"}, row
        assert isinstance(row["value"], (int, float)) and math.isfinite(row["value"]), row
        assert row["pass"] == (None if row["target"] is None else row["value"] <= row["target"]), row
    # And each row names the part that measured it (`bench.py --only <part>` measures it again), the parts in order
    parts = [row["part"] for row in rows]
    assert list(dict.fromkeys(parts)) == SMOKE_PARTS, parts
    part_of = {row["name"]: row["part"] for row in rows}
    assert part_of["adaptive: first decision after a burst (1 s interval)"] == "bursty"
    assert part_of["GET list p99 at 10 clusters (0 workers each)"] == "many-clusters"
    assert part_of["GET list p99 at 5 clusters: clustermgr"] == "side-by-side"
    names = {row["name"] for row in rows}
    # And the targets of the issue are all there, measured against LocalCluster in the same run
    assert {
        "create -> 2 workers running: ratio clustermgr / LocalCluster",
        "scale 2 -> 4 workers: ratio clustermgr / LocalCluster",
        "delete: ratio clustermgr / LocalCluster",
        "warm launcher idle memory (RSS)",
        "push p99 with 5 subscribers",
        "GET list p99 at 10 clusters (0 workers each)",
        "server RSS per cluster (10 clusters)",
        "adaptive: first decision after a burst (1 s interval)",
        "TLS on/off: create -> 2 workers running: ratio TLS / plain",
        "TLS on/off: 1,000-task graph: ratio TLS / plain",
        "idle server, extension on - off: USS of the server and its descendants",
        "idle server, extension on - off: processes",
        "idle server, extension on - off: CPU",
        "server whose clusters are all gone, extension on - off: USS of the server and its descendants",
        "server whose clusters are all gone, extension on - off: processes",
        "first create after start -> 2 workers running: ratio clustermgr / LocalCluster",
        "server boot -> API answers: extension on / off",
        "server restarted with 1 cluster to re-adopt -> API answers and every cluster running",
    } <= names
    table = out.with_suffix(".md").read_text()
    assert "| benchmark | value | target | pass | reproduce: `bench.py …` | note |" in table
    assert "| `--only many-clusters` |" in table


def test_a_part_the_benchmark_does_not_have_is_refused_with_the_parts_it_has(tmp_path):
    # Given a misspelt part
    out = tmp_path / "rows.json"
    # When the benchmark is asked for it
    result = run_bench("--only", "tls,lifecyle", "--out", str(out), timeout=120)
    # Then it measures nothing and names the part and the parts there are
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "no part named 'lifecyle'" in result.stderr and "side-by-side" in result.stderr, result.stderr
    assert not out.exists()


# Four Jupyter servers, a dask-gateway, a private sshd and a TLS scheduler started elsewhere: 40 s on a quiet machine.
@pytest.mark.timeout(600)
def test_backend_footprint_rows_are_measured_and_leave_no_process(tmp_path):
    # Given the backend footprint part of the benchmark, alone, short (2 s measurements, servers let go after 2 s),
    # without the test bed's SLURM side (test_multihost.py uses the bed meanwhile)
    out = tmp_path / "rows.json"
    # When it runs (its exit code is non-zero if any process it started is still there at the end)
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "backend_footprint.py"), "--seconds", "2", "--release-after", "2",
         "--without-bed", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # Then every row is well formed, and each side's rows are there: idle with a template, then its clusters gone
    rows = {row["name"]: row for row in json.loads(out.read_text())}
    for row in rows.values():
        assert set(row) <= ROW_KEYS | {"note"} and math.isfinite(row["value"]), row
        assert row["pass"] == (None if row["target"] is None else row["value"] <= row["target"]), row
    sides = ("with an SSH template", "with a dask-gateway template", "that attached a TLS cluster")
    for side in sides:
        for what in ("USS of the server and its descendants", "processes"):
            assert f"server {side}, its clusters gone, sidebar open, extension on - off: {what}" in rows
    # And no server kept a process once its clusters were gone, and nothing was left on the SSH host
    kept = [name for name, row in rows.items() if name.endswith(": processes") and not row["pass"]]
    assert kept == [], [rows[name] for name in kept]
    assert rows["processes left below the SSH host's sshd after its clusters"]["value"] == 0


def test_what_a_spawned_worker_imports_again_of_the_benchmark_is_only_the_benchmark():
    # Given the benchmark's main module, which every process a LocalCluster of it spawns imports again (__mp_main__)
    program = "import sys; sys.path[:0] = ['benchmarks', '.']; import bench; print(sorted(sys.modules))"
    # When it is imported as those processes do
    result = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    # Then nothing of tests/ comes with it (its helpers ask SLURM at import: up to 15 s added to each LocalCluster
    # worker's start when SLURM does not run, which made LocalCluster look 10x slower than it is), nor a server
    modules = set(eval(result.stdout))  # noqa: S307 - a list of module names printed by the child
    assert not {m for m in modules if m.split(".")[0] in ("tests", "jupyter_server", "dask_gateway_server")}
