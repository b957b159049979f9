"""The bursty workload: a fixed cluster, distributed's ``Adaptive`` and clustermgr's adaptive mode, side by side.

A seeded script of bursts of tasks that *sleep* (so the machine's 2 cores are not what limits
them), with idle gaps between bursts, runs against each side in turn. Each side reports wall
time (first submit -> last burst done), core-seconds held (threads x lifetime of every worker,
sampled from its scheduler every :data:`SAMPLE_INTERVAL` s), the tasks' own core-seconds (the sum
of their sleeps), worker starts and recomputed tasks (a task that ran more than once because the
worker holding it was closed). The two-group workload (CPU workers and workers with a ``GPU``
resource) alternates bursts of each kind and reports the core-seconds of workers started in a
group that the current burst does not need.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SAMPLE_INTERVAL = 0.1
EXECUTED = "bursty-executed"  # the topic every task logs its id to (recomputations show as repeats)


@dataclass(frozen=True)
class Burst:
    """``durations`` (s) of the tasks submitted at once, the gap after it, and the resource they need."""

    durations: tuple[float, ...]
    gap: float
    resource: str | None = None


def script(
    seed: int, bursts: int = 4, tasks=(60, 120), sleep=(0.2, 0.8), gaps=(8.0, 12.0), kinds=(None,)
) -> list[Burst]:
    """A fixed, seeded script: ``bursts`` bursts of ``tasks`` tasks sleeping ``sleep`` s, ``gaps`` s apart."""
    rng = random.Random(seed)
    out = []
    for i in range(bursts):
        n = rng.randint(*tasks)
        out.append(
            Burst(
                durations=tuple(round(rng.uniform(*sleep), 3) for _ in range(n)),
                gap=round(rng.uniform(*gaps), 2),
                resource=kinds[i % len(kinds)],
            )
        )
    return out


def nap(task_id: int, seconds: float) -> float:
    """The task: sleep, then log its id to the scheduler so that a second run of it can be counted."""
    from distributed import get_worker

    time.sleep(seconds)
    get_worker().log_event(EXECUTED, task_id)
    return seconds


def workers_now(dask_scheduler=None) -> dict[str, Any]:
    """Run on the scheduler: address -> (threads, advertises GPU, tasks processing) of every worker, and tasks waiting."""
    return {
        "workers": {
            a: (ws.nthreads, "GPU" in (ws.resources or {}), len(ws.processing))
            for a, ws in dask_scheduler.workers.items()
        },
        "waiting": len(dask_scheduler.queued) + len(dask_scheduler.unrunnable),
    }


@dataclass
class Sampler:
    """Samples the scheduler's workers every :data:`SAMPLE_INTERVAL` s in a thread, until stopped."""

    client: Any
    samples: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            t = time.monotonic()
            with contextlib.suppress(Exception):  # a sample lost to a busy scheduler is a gap, filled by the next
                self.samples.append((t, self.client.run_on_scheduler(workers_now)))
            self.stop.wait(max(0.0, SAMPLE_INTERVAL - (time.monotonic() - t)))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)

    def core_seconds(self, start: float, end: float, where: Callable[..., bool] = lambda t, a, g: True) -> float:
        """Threads x time of the workers sampled between ``start`` and ``end`` that ``where(t, address, gpu)`` keeps.

        ``where`` may also take ``processing`` (the worker's tasks) and ``waiting`` (the scheduler's
        tasks without a worker yet) as keywords.
        """
        total = 0.0
        inside = [(t, s) for t, s in self.samples if start <= t <= end]
        for (t, sample), (t_next, _) in zip(inside, inside[1:]):
            kept = 0
            for a, (n, gpu, processing) in sample["workers"].items():
                try:
                    keep = where(t, a, gpu, processing=processing, waiting=sample["waiting"])
                except TypeError:
                    keep = where(t, a, gpu)
                kept += n if keep else 0
            total += (t_next - t) * kept
        return total

    def first_seen(self) -> dict[str, float]:
        seen: dict[str, float] = {}
        for t, sample in self.samples:
            for address in sample["workers"]:
                seen.setdefault(address, t)
        return seen


def run(client, bursts: list[Burst], log: Callable[[str], None] = print, adaptive: bool = True) -> dict[str, Any]:
    """Play ``bursts`` on the cluster behind ``client``; the figures of one side.

    Held core-seconds are counted from the first submit until an ``adaptive`` side is back to 0
    workers after the last burst (at most 60 s), or until the last burst is done on a fixed one.
    """
    sampler = Sampler(client)
    windows: list[tuple[float, float, str | None]] = []
    next_id = 0
    try:
        time.sleep(1.0)  # a few samples of the cluster at rest first
        t0 = time.monotonic()
        for i, burst in enumerate(bursts):
            ids = list(range(next_id, next_id + len(burst.durations)))
            next_id += len(ids)
            start = time.monotonic()
            resources = {burst.resource: 1} if burst.resource else None
            futures = client.map(nap, ids, burst.durations, pure=False, resources=resources)
            client.gather(futures)
            del futures  # released: no worker holds data a client references between bursts
            end = time.monotonic()
            windows.append((start, end, burst.resource))
            log(
                f"  burst {i + 1}/{len(bursts)}: {len(ids)} tasks{' on ' + burst.resource if burst.resource else ''} in {end - start:.1f} s"
            )
            if i < len(bursts) - 1:
                time.sleep(burst.gap)
        wall = time.monotonic() - t0
        t_end = t0 + wall
        deadline = t_end + 60
        while adaptive and time.monotonic() < deadline:  # the last shrink is held time too
            time.sleep(SAMPLE_INTERVAL)
            if sampler.samples and sampler.samples[-1][0] > t_end and not sampler.samples[-1][1]["workers"]:
                t_end = sampler.samples[-1][0]
                break
    finally:
        sampler.close()
    executed = Counter(task_id for _, task_id in client.get_events(EXECUTED))
    starts = sum(
        1 for _, event in client.get_events("all") if isinstance(event, dict) and event.get("action") == "add-worker"
    )
    seen = sampler.first_seen()

    def unneeded(t: float, address: str, gpu: bool) -> bool:
        """A worker of the group the current burst does not need, started during that burst."""
        for start, end, resource in windows:
            if start <= t <= end + 1.0:
                return gpu != (resource == "GPU") and seen.get(address, 0) >= start
        return False

    return {
        "wall": wall,
        "held": sampler.core_seconds(t0, t_end),
        "tasks": sum(sum(b.durations) for b in bursts),
        "starts": starts,
        "recomputed": sum(n - 1 for n in executed.values()),
        "missing": next_id - len(executed),
        "unneeded": sampler.core_seconds(t0, t_end, unneeded),
        "gpu_held": sampler.core_seconds(t0, t_end, lambda t, a, gpu: gpu),
        "cpu_held": sampler.core_seconds(t0, t_end, lambda t, a, gpu: not gpu),
        # a held thread without a task: with nothing waiting (a worker adaptive mode could retire), or
        # while tasks wait for it (the time a task takes to reach a free thread: the scheduler's, not the policy's)
        "idle_nothing_waiting": sampler.core_seconds(
            t0, t_end, lambda t, a, gpu, processing, waiting: not processing and not waiting
        ),
        "idle_tasks_waiting": sampler.core_seconds(
            t0, t_end, lambda t, a, gpu, processing, waiting: not processing and waiting
        ),
    }
