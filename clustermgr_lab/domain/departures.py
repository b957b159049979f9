"""Why a worker went away: the machine-readable cause of a departure, from exit codes, logs and batch job states.

A cause is ``{"kind", "worker", "group", "detail"}`` (the ``cause`` of an event, team contract 4).
The evidence comes from four places, each read by a function here: the exit code of a process
this server watched (:func:`from_returncode`), the lines the worker's nanny wrote to its log when
it killed or lost the worker process (:func:`from_nanny_log`), the final state the batch
system gives a job (:func:`from_job_state`), and the kernel's log, which names each process its
OOM killer killed (:func:`read_kernel_log`, :func:`oom_kill_of`; where it cannot be read, the OOM-kill
count of a memory cgroup, v1 or v2, :func:`oom_kills`). A lost connection is a restart the nanny logs as the
scheduler's for its worker-ttl (a worker it stopped hearing from), or what none of them explains.
"""

from __future__ import annotations

import ast
import os
import re
import signal
from dataclasses import dataclass, replace
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
# distributed's scheduler, having heard nothing from a worker for its worker-ttl, has the worker's nanny restart it
# (Scheduler.check_worker_ttl): the nanny says so with the scheduler's stimulus id as the reason (WorkerProcess.kill).
WORKER_TTL_RESTART = re.compile(r"Nanny asking worker to close\. Reason: check-worker-ttl-")
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


def recomputed_tasks(scheduler_log: str, address: str) -> int | None:
    """How many computed tasks the scheduler lost with the worker at ``address`` and recomputes elsewhere.

    From distributed's scheduler log line ``Removing worker '<address>' caused the cluster to lose already
    computed task(s), which will be recomputed elsewhere: {keys}``; None when it lost none (or logged nothing).

    >>> line = ("2026-12-05 12:00:00,000 - distributed.scheduler - WARNING - Removing worker 'tls://10.0.0.1:4000' "
    ...         "caused the cluster to lose already computed task(s), which will be recomputed elsewhere: "
    ...         "{'inc-1', ('x', 0), ('x', 1)} (stimulus_id='handle-worker-cleanup-1')")
    >>> recomputed_tasks(line, "tls://10.0.0.1:4000"), recomputed_tasks(line, "tls://10.0.0.1:4001")
    (3, None)
    """
    marker = f"Removing worker {address!r} caused the cluster to lose already computed task(s)"
    found = None
    for line in scheduler_log.splitlines():
        if marker in line:
            found = line.split("recomputed elsewhere: ", 1)[-1].rsplit(" (stimulus_id=", 1)[0]
    if found is None:
        return None
    try:
        return len(ast.literal_eval(found))
    except (ValueError, SyntaxError, TypeError):  # keys that do not read back as literals: count the top-level items
        return found.count(", ") + 1


def lines_since_start(text: str, address: str | None) -> list[str]:
    """The lines of a nanny's log from the first one naming ``address`` (where that worker process started) on."""
    lines = text.splitlines()
    if address:
        lines = lines[next((i for i, line in enumerate(lines) if address in line), 0) :]
    return lines


def dead_worker_pids(text: str, address: str | None) -> set[int]:
    """The PIDs of the worker processes whose death the nanny logged since the worker at ``address`` started."""
    return {int(match["pid"]) for line in lines_since_start(text, address) if (match := WORKER_DEATH.search(line))}


def from_nanny_log(text: str, address: str | None, memory_limit: int | None) -> tuple[str, str] | None:
    """``(kind, detail)`` from what a worker's nanny logged after the worker process at ``address`` started.

    Only the lines from the first one naming ``address`` (where that worker process started) count:
    an earlier incarnation's lines are not this departure's.
    """
    lines = lines_since_start(text, address)
    limit = f" of its {format_bytes(memory_limit)} limit" if memory_limit else ""
    for line in lines:
        match = MEMORY_BUDGET.search(line)
        if match and (address is None or match["address"] == address):
            return "memory-limit", f"killed by its nanny: memory above {match['percent']}%{limit}"
    death = last_worker_death(lines)
    if any(WORKER_TTL_RESTART.search(line) for line in lines):  # the death, if any, was the nanny's doing
        how = f" ({death[1]})" if death else ""
        return "connection-lost", (
            f"the scheduler heard nothing from {address or 'it'} for longer than its worker-ttl "
            f"(its process hung, frozen or cut off) and had its nanny restart it{how}"
        )
    return death


def last_worker_death(lines: list[str]) -> tuple[str, str] | None:
    """``(kind, detail)`` of the last worker-process death among a nanny's log ``lines``, if it logged one."""
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
    """``(kind, detail)`` from slurmstepd's CANCELLED line in a job's output, when SLURM no longer lists the job
    or lists it only as COMPLETING (its processes still ending); in the words :func:`from_job_state` uses.

    Examples
    --------
    >>> from_slurm_output("slurmstepd: error: *** JOB 42 ON node1 CANCELLED AT 2026-12-01T14:00:00 DUE TO TIME LIMIT ***")
    ('TIMEOUT', 'job 42 reached its walltime (slurmstepd)')
    """
    for line in reversed(text.splitlines()):
        match = SLURM_STEP_LINE.search(line)
        if match:
            job, why = match["job"], (match["why"] or "").strip()
            if why and why not in SLURM_DUE_TO:
                return "CANCELLED", f"job {job} cancelled due to {why.lower()} (slurmstepd)"
            kind, detail = from_job_state(job, SLURM_DUE_TO.get(why, "CANCELLED"), None, cancelled_by_us=False)
            return kind, f"{detail} (slurmstepd)"
    return None


@dataclass(frozen=True)
class MemoryCgroup:
    """The memory cgroup a process is in: ``version`` 1 or 2, its ``path`` under /sys/fs/cgroup (a folder)."""

    version: int
    path: Path

    def oom_kills(self) -> int | None:
        """How many processes the OOM killer has killed in this cgroup (v2: and below it); None if unreadable.

        cgroup v1 counts in ``memory.oom_control`` (its ``oom_kill`` line, this cgroup only), v2 in
        ``memory.events``.
        """
        try:
            text = (self.path / ("memory.oom_control" if self.version == 1 else "memory.events")).read_text()
        except OSError:
            return None
        for entry in text.splitlines():
            key, _, value = entry.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return None


def memory_cgroup(pid: int | None = None) -> MemoryCgroup | None:
    """The memory cgroup of ``pid`` (this process by default): cgroup v1's memory controller where it is
    mounted, else the v2 unified hierarchy if it has the memory controller; None where neither can be read."""
    try:
        memberships = Path(f"/proc/{pid or 'self'}/cgroup").read_text().splitlines()
        mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return None
    v1 = next((m[1] for m in mounts if len(m) > 3 and m[2] == "cgroup" and "memory" in m[3].split(",")), None)
    v2 = next((m[1] for m in mounts if len(m) > 2 and m[2] == "cgroup2"), None)
    for line in memberships:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if v1 and "memory" in controllers.split(","):
            return MemoryCgroup(1, Path(v1) / path.lstrip("/"))
        if v2 and hierarchy == "0" and controllers == "":
            found = Path(v2) / path.lstrip("/")
            if (found / "memory.events").exists():
                return MemoryCgroup(2, found)
    return None


def oom_kills(pid: int | None = None) -> int | None:
    """How many processes the kernel's OOM killer has killed in the memory cgroup of ``pid`` (this process by
    default), cgroup v1 or v2; None where that cannot be read. A count of a whole cgroup: the fallback evidence
    when the kernel log (:func:`kernel_oom_kills`), which names the killed process, cannot be read."""
    cgroup = memory_cgroup(pid)
    return cgroup.oom_kills() if cgroup is not None else None


# The kernel's OOM killer (mm/oom_kill.c), as /dev/kmsg records "<prio>,<seq>,<usec since boot>,<flags>;<text>":
#   oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/a/b,task_memcg=/a/b,task=python3,pid=11906,uid=0
#   Memory cgroup out of memory: Killed process 11906 (python3) total-vm:221448kB, anon-rss:211200kB, file-rss:6620kB, ...
#   Out of memory: Killed process 11906 (python3) total-vm:... (the machine's memory; kernels before 5.0 wrote
#   "...: Kill process 11906 (python3) score 1000 or sacrifice child" and then "Killed process 11906 (python3) ...")
KMSG_RECORD = re.compile(r"(?P<prio>\d+),(?P<seq>\d+),(?P<usec>\d+),[^;]*;(?P<text>[^\n]*)")
# The process name (its comm, 15 bytes, e.g. "dask worker [tl") may hold spaces, commas and parentheses.
OOM_KILL_LINE = re.compile(r"^oom-kill:(?P<fields>.*?),task=(?P<task>.*),pid=(?P<pid>\d+)(?:,|$)")
KILLED_LINE = re.compile(
    r"^(?:(?P<why>Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?): )?"
    r"Kill(?:ed)? process (?P<pid>\d+) \((?P<name>.*)\)(?P<rest>(?: total-vm:| score ).*)$"
)
ANON_RSS = re.compile(r"\banon-rss:(?P<kb>\d+)kB")
# Seconds: the kernel log's clock (local_clock) is not NTP-slewed like CLOCK_MONOTONIC, so the two drift apart by
# some parts per million of the uptime; an earlier holder of a PID OOM-killed within this slack is far-fetched.
KERNEL_CLOCK_SLACK = 60.0


@dataclass(frozen=True)
class OomKill:
    """One process the kernel's OOM killer killed, as its log tells: when (seconds since boot, the kernel's
    clock, like :func:`time.monotonic`), which process, the cgroup whose limit was reached (None: the machine's
    memory ran out) and how much memory the process held."""

    seconds: float
    pid: int
    process: str = "?"
    constraint: str | None = None
    memcg: str | None = None
    anon_rss: int | None = None

    def describe(self) -> str:
        """The reason in words, e.g. ``killed by the kernel's OOM killer (SIGKILL): its memory cgroup /jobs/7 was
        at its limit (process 4242 "python3", holding 1.95 GiB)``."""
        if self.constraint == "CONSTRAINT_MEMCG" or (self.constraint is None and self.memcg is not None):
            where = " ".join(filter(None, ("its memory cgroup", self.memcg, "was at its limit")))
        elif self.constraint in ("CONSTRAINT_CPUSET", "CONSTRAINT_MEMORY_POLICY"):
            where = "the memory nodes it may use were full"
        else:
            where = "the machine was out of memory"
        held = f", holding {format_bytes(self.anon_rss)}" if self.anon_rss is not None else ""
        return f'killed by the kernel\'s OOM killer (SIGKILL): {where} (process {self.pid} "{self.process}"{held})'


def kernel_oom_kills(records: list[str], since: float = 0.0) -> dict[int, OomKill]:
    """The OOM kills told in kernel log ``records`` (/dev/kmsg's format) no older than ``since``, by PID (the last of each).

    A kill is told in two lines (``oom-kill:...`` with the cgroup, ``...Killed process ...`` with the memory);
    either is enough, and the two lines of one kill are merged.
    """
    kills: dict[int, OomKill] = {}
    for record in records:
        match = KMSG_RECORD.match(record)
        if match is None or int(match["usec"]) / 1e6 < since - KERNEL_CLOCK_SLACK:
            continue
        seconds, text = int(match["usec"]) / 1e6, match["text"]
        if found := OOM_KILL_LINE.match(text):
            fields = dict(field.partition("=")[::2] for field in found["fields"].split(","))
            pid = int(found["pid"])
            told = {"process": found["task"], "constraint": fields.get("constraint"),
                    "memcg": fields.get("oom_memcg") or fields.get("task_memcg")}  # fmt: skip
        elif (found := KILLED_LINE.match(text)) and (found["why"] or "total-vm" in found["rest"]):
            pid, rss = int(found["pid"]), ANON_RSS.search(found["rest"])
            told = {"process": found["name"], "anon_rss": int(rss["kb"]) * 1024 if rss else None,
                    "constraint": "CONSTRAINT_MEMCG" if found["why"] == "Memory cgroup out of memory" else None}  # fmt: skip
        else:
            continue
        told = {key: value for key, value in told.items() if value}
        earlier = kills.get(pid)
        if earlier is not None and seconds - earlier.seconds < 1:  # the other line of the same kill
            kills[pid] = replace(earlier, **told)
        else:
            kills[pid] = OomKill(seconds, pid, **told)
    return kills


def oom_kill_of(records: list[str], pids: set[int], since: float) -> OomKill | None:
    """The OOM kill of one of ``pids`` since ``since`` (``time.monotonic()`` seconds) that kernel log
    ``records`` (:func:`read_kernel_log`) tell of, or None: evidence of this process, never a neighbour's."""
    kills = kernel_oom_kills(records, since)
    return next((kills[pid] for pid in sorted(pids) if pid in kills), None)


def read_kernel_log(path: str = "/dev/kmsg", max_records: int = 200_000) -> list[str] | None:
    """The kernel log's OOM-killer records (the first line of each), oldest first; None if it cannot be read.

    Reads /dev/kmsg without waiting (O_NONBLOCK: it ends where the log ends) and keeps only the records that
    may tell of an OOM kill, so memory stays small; at most ``max_records`` are looked at (the ring buffer
    holds far fewer). Blocking I/O: the server runs it in an executor. Reading /dev/kmsg needs root or
    ``kernel.dmesg_restrict = 0``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    kept = []
    try:
        for _ in range(max_records):
            try:
                data = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # overwritten while we read: reading goes on at the oldest record left
                continue
            except OSError:  # a record we cannot take: keep what was read
                break
            if not data:
                break
            record = data.decode(errors="replace").split("\n", 1)[0]
            if "Kill" in record or "oom-kill:" in record:
                kept.append(record)
    finally:
        os.close(fd)
    return kept
