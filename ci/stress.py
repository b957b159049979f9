"""Flake guard: run the test suites N times under CPU load and print a table of test -> failures.

``make test-stress`` runs it (not part of ``make test``). It starts the load itself (``stress-ng --cpu K``,
or K busy Python processes where stress-ng is missing) and stops it at the end, pass or fail. The
services the suites need (SLURM, Grid Engine) follow the rule of ``make test`` (``ci/services.sh``): started
when not running, and at the end only those this run started are stopped (``KEEP_SERVICES=1`` keeps them).
After every run, ``ci/check-leftovers.sh`` checks that the run left no process behind.

Usage: ``python ci/stress.py [--runs 3] [--cpus 4] [--suites pytest,galata] [--pytest-args "..."]``
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTEST_ARGS = "-n 2 --dist loadgroup -q -p no:cacheprovider"
# The load without stress-ng: K processes that spin.
SPIN = """
import multiprocessing, sys
hogs = [multiprocessing.Process(target=lambda: [0 for _ in iter(int, 1)]) for _ in range(int(sys.argv[1]))]
for hog in hogs:
    hog.start()
for hog in hogs:
    hog.join()
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=int(os.environ.get("STRESS_RUNS", 3)), help="runs of each suite (default 3)"
    )
    parser.add_argument(
        "--cpus",
        type=int,
        default=int(os.environ.get("STRESS_CPUS", 4)),
        help="busy CPU workers of the load (default 4)",
    )
    parser.add_argument(
        "--suites", default=os.environ.get("STRESS_SUITES", "pytest,galata"), help="comma-separated: pytest, galata"
    )
    parser.add_argument(
        "--pytest-args", default=os.environ.get("STRESS_PYTEST_ARGS", PYTEST_ARGS), help=f"default: {PYTEST_ARGS!r}"
    )
    parser.add_argument("--out", type=Path, default=None, help="folder for reports (default: a new one under /tmp)")
    args = parser.parse_args(argv)
    unknown = set(args.suites.split(",")) - {"pytest", "galata"}
    if unknown or args.runs < 1 or args.cpus < 0:
        parser.error(f"bad --suites {sorted(unknown)} / --runs / --cpus")
    return args


class Load:
    """K CPU hogs in a session of their own, from start() to stop(); the load average is sampled meanwhile."""

    def __init__(self, cpus: int):
        self.cpus = cpus
        self.process: subprocess.Popen | None = None
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> Load:
        if self.cpus:
            if subprocess.run(["sh", "-c", "command -v stress-ng"], capture_output=True).returncode == 0:
                command = ["stress-ng", "--cpu", str(self.cpus), "--timeout", "6h", "--quiet"]
            else:  # the same, without stress-ng: K processes that spin
                command = [sys.executable, "-c", SPIN, str(self.cpus)]
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
            print(f"[stress] load: {' '.join(command[:4])} (pid {self.process.pid})", flush=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(10):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> None:
        self._stop.set()
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # its own session: stress-ng and the workers it forked
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def summary(self) -> str:
        if not self.samples:
            return "load average: not sampled"
        s = sorted(self.samples)
        return f"1-min load average min {s[0]:.1f} / median {s[len(s) // 2]:.1f} / max {s[-1]:.1f} (2 cores; {len(s)} samples)"


def failures_in(junit: Path) -> list[str]:
    """The names of the failed or erroring test cases of a JUnit XML report."""
    failed = []
    for case in ElementTree.parse(junit).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            classname = case.get("classname", "")
            failed.append(f"{classname}::{case.get('name')}" if classname else case.get("name", "?"))
    return failed


def run_suite(
    suite: str, run: int, out: Path, args: argparse.Namespace, env: dict[str, str]
) -> tuple[list[str], float]:
    """Run one suite once; return its failed tests (or the suite itself when it gave no report) and its wall time."""
    junit = out / f"{suite}-{run}.xml"
    log = out / f"{suite}-{run}.log"
    if suite == "pytest":
        command = [
            sys.executable,
            "-m",
            "pytest",
            *shlex.split(args.pytest_args),
            f"--junitxml={junit}",
            f"--basetemp={out / f'pytest-{run}'}",
        ]
        cwd = REPO
    else:
        # as `make test` runs them: Playwright shards side by side, each with a server of its own
        # (ui_shards.py sets CI, the ports and CHROMIUM_PATH's default, and runs Playwright in ui-tests/)
        command = [sys.executable, str(REPO / "ci" / "ui_shards.py"), "--junit", str(out / f"{suite}-{run}")]
        cwd = REPO
    started = time.monotonic()
    print(f"[stress] run {run}/{args.runs}: {suite} (log: {log})", flush=True)
    with open(log, "wb") as log_file:
        code = subprocess.run(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        ).returncode
    elapsed = time.monotonic() - started
    reports = [junit] if suite == "pytest" else sorted(out.glob(f"{suite}-{run}-*.xml"))  # galata: one per shard
    failed = [name for report in reports if report.exists() for name in failures_in(report)]
    if code != 0 and not failed:
        failed = [f"{suite} (exit code {code}, no failed test in its report: see {log.name})"]
    print(f"[stress] run {run}/{args.runs}: {suite}: {len(failed)} failed in {elapsed / 60:.1f} min", flush=True)
    return failed, elapsed


def services(action: str, out: Path, env: dict[str, str]) -> int:
    sudo = shlex.split(os.environ.get("SUDO", ""))
    return subprocess.run([*sudo, "bash", str(REPO / "ci" / "services.sh"), action, str(out)], env=env).returncode


def leftovers(out: Path, env: dict[str, str], keep_services: bool) -> bool:
    """True when ci/check-leftovers.sh finds nothing of this run still running."""
    env = {**env, "KEEP_SERVICES": "1"} if keep_services else env
    return subprocess.run(["bash", str(REPO / "ci" / "check-leftovers.sh"), "check", str(out)], env=env).returncode == 0


def table(failures: Counter, runs: int, times: dict[str, list[float]], load: str) -> str:
    lines = [f"{runs} runs under load; {load}", ""]
    for suite, elapsed in times.items():
        lines.append(f"{suite}: {len(elapsed)} runs, {' / '.join(f'{t / 60:.1f}' for t in elapsed)} min")
    lines += ["", "| test | failures |", "|---|---|"]
    for name, count in sorted(failures.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"| {name} | {count} of {runs} |")
    if not failures:
        lines.append(f"| (every test) | 0 of {runs} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # SIGTERM (e.g. a CI job cancelled) ends the run through the finally below: the load and the services stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = args.out or Path("/tmp") / f"clustermgr-stress-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    failures: Counter = Counter()
    times: dict[str, list[float]] = {}
    suites = args.suites.split(",")
    load = Load(args.cpus)
    status = 0
    try:
        if services("start", out, env) != 0:
            print("[stress] the services did not start", file=sys.stderr)
            return 1
        subprocess.run(["bash", str(REPO / "ci" / "check-leftovers.sh"), "snapshot", str(out)], check=True)
        load.start()
        for run in range(1, args.runs + 1):
            for suite in suites:
                run_env = {**env, "CLUSTERMGR_TEST_RUN": f"stress-{uuid.uuid4().hex[:12]}"}
                failed, elapsed = run_suite(suite, run, out, args, run_env)
                times.setdefault(suite, []).append(elapsed)
                failures.update(failed)
                if not leftovers(out, run_env, keep_services=True):
                    failures[f"{suite} run left processes behind"] += 1
    finally:
        load.stop()
        if services("stop", out, env) != 0:
            status = 1
        if not leftovers(out, {**env, "CLUSTERMGR_TEST_RUN": ""}, keep_services=False):
            failures["services this run started are still running"] += 1
    report = table(failures, args.runs, times, load.summary())
    (out / "stress-table.md").write_text(report + "\n")
    print("\n" + report + f"\n\n(reports and logs: {out})")
    return 1 if failures or status else status


if __name__ == "__main__":
    sys.exit(main())
