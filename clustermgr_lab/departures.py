"""Why a worker went away: the machine-readable cause of a departure, from exit codes, logs and batch job states.

A cause is ``{"kind", "worker", "group", "detail"}`` (the ``cause`` of an event, team contract 4).
The evidence comes from three places, each read by a function here: the exit code of a process
this server watched (:func:`from_returncode`), the lines the worker's nanny wrote to its log when
it killed or lost the worker process (:func:`from_nanny_log`), and the final state the batch
system gives a job (:func:`from_job_state`). What none of them explains is a lost connection.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

from dask.utils import format_bytes

KINDS = (
    "exit", "signal", "memory-limit", "oom-killer", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "CANCELLED", "PREEMPTED",
    "connection-lost", "unknown",
)  # fmt: skip
BATCH_KINDS = {"TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "CANCELLED", "PREEMPTED"}

# distributed's nanny: worker_memory.py and nanny.py (Nanny._death_message)
MEMORY_BUDGET = re.compile(r"Worker (?P<address>\S+) \(pid=(?P<pid>\d+)\) exceeded (?P<percent>\d+)% memory budget")
WORKER_DEATH = re.compile(
    r"Worker process (?P<pid>\d+) (?:was killed by signal (?P<signal>\d+)|exited with status (?P<status>\d+)"
    r"|was killed by unknown signal)"
)
# slurmstepd's line in the job's standard error: "*** JOB 42 ON node CANCELLED AT 2026-12-01T14:00:00 DUE TO TIME LIMIT ***"
SLURM_STEP_LINE = re.compile(
    r"\*\*\* JOB (?P<job>\d+) ON \S+ CANCELLED AT \S+(?: DUE TO (?P<why>[A-Z ]+?))?(?: \*\*\*|$)"
)
SLURM_DUE_TO = {"TIME LIMIT": "TIMEOUT", "NODE FAILURE": "NODE_FAIL", "PREEMPTION": "PREEMPTED"}


@dataclass(frozen=True)
class Cause:
    """Why worker ``worker`` of ``group`` went away: ``kind`` (one of :data:`KINDS`) and a line for people."""

    kind: str
    worker: str
    group: str | None
    detail: str

    def to_dict(self) -> dict:
        return {"kind": self.kind, "worker": self.worker, "group": self.group, "detail": self.detail}


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def from_returncode(returncode: int | None) -> tuple[str, str] | None:
    """``(kind, detail)`` from a process's exit code (negative: the signal that killed it); None if unknown."""
    if returncode is None:
        return None
    if returncode < 0:
        return "signal", f"killed by signal {-returncode} ({signal_name(-returncode)})"
    return "exit", f"exited with code {returncode}"


def from_nanny_log(text: str, address: str | None, memory_limit: int | None) -> tuple[str, str] | None:
    """``(kind, detail)`` from what a worker's nanny logged after the worker process at ``address`` started.

    Only the lines from the first one naming ``address`` (where that worker process started) count:
    an earlier incarnation's lines are not this departure's.
    """
    lines = text.splitlines()
    if address:
        lines = lines[next((i for i, line in enumerate(lines) if address in line), 0) :]
    limit = f" of its {format_bytes(memory_limit)} limit" if memory_limit else ""
    for line in lines:
        match = MEMORY_BUDGET.search(line)
        if match and (address is None or match["address"] == address):
            return "memory-limit", f"killed by its nanny: memory above {match['percent']}%{limit}"
    for line in reversed(lines):
        match = WORKER_DEATH.search(line)
        if match is None:
            continue
        if match["signal"]:
            number = int(match["signal"])
            return "signal", f"worker process {match['pid']} killed by signal {number} ({signal_name(number)})"
        if match["status"]:
            return "exit", f"worker process {match['pid']} exited with code {match['status']}"
        return "signal", f"worker process {match['pid']} killed by an unknown signal"
    return None


def from_job_state(job_id: str, state: str, reason: str | None, cancelled_by_us: bool) -> tuple[str, str] | None:
    """``(kind, detail)`` from a batch job's final state (SLURM's names), or None for a state that explains nothing."""
    state = state.split()[0] if state else ""
    why = f" ({reason})" if reason and reason not in ("None", "") else ""
    if state == "TIMEOUT":
        return "TIMEOUT", f"job {job_id} reached its walltime{why}"
    if state == "NODE_FAIL":
        return "NODE_FAIL", f"job {job_id}: its node failed{why}"
    if state == "OUT_OF_MEMORY":
        return "OUT_OF_MEMORY", f"job {job_id} ran out of memory (the batch system's limit){why}"
    if state == "PREEMPTED":
        return "PREEMPTED", f"job {job_id} was preempted{why}"
    if state == "CANCELLED" and not cancelled_by_us:
        return "CANCELLED", f"job {job_id} was cancelled from outside this server (scancel or an administrator){why}"
    if state == "FAILED":
        return "exit", f"job {job_id} failed{why}"
    if state == "COMPLETED":
        return "exit", f"job {job_id} ended (its worker exited){why}"
    return None


def from_slurm_output(text: str) -> tuple[str, str] | None:
    """``(kind, detail)`` from slurmstepd's CANCELLED line in a job's output, when SLURM no longer lists the job."""
    for line in reversed(text.splitlines()):
        match = SLURM_STEP_LINE.search(line)
        if match:
            why = (match["why"] or "").strip()
            kind = SLURM_DUE_TO.get(why, "CANCELLED")
            detail = f"job {match['job']} " + (
                f"cancelled due to {why.lower()}" if why else "cancelled from outside this server"
            )
            return kind, f"{detail} (slurmstepd)"
    return None


def oom_kills(pid: int | None = None) -> int | None:
    """How many processes the kernel's OOM killer has killed in the memory cgroup of ``pid`` (this process by default).

    From cgroup v2's ``memory.events``; None where that cannot be read (cgroup v1, no permission).
    """
    try:
        line = Path(f"/proc/{pid or 'self'}/cgroup").read_text().splitlines()[0]
        events = Path("/sys/fs/cgroup") / line.split("::", 1)[1].lstrip("/") / "memory.events"
        for entry in events.read_text().splitlines():
            key, _, value = entry.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, IndexError, ValueError):
        return None
    return None
