"""The bursty workload whose results stay on the workers: bursts that keep data, a later burst that reads it.

The same seeded bursts as :mod:`bursty` (durations and gaps of :func:`bursty.script`), but every
task returns :data:`NBYTES` of data that the client keeps referencing (its futures are held to the
end), and from the second burst on, half of each burst's tasks each read ``fan_in`` results of
earlier bursts, drawn at random (a groupby/shuffle-like step: tasks that depend on several earlier
results, wherever they are). Between bursts the cluster idles with the data held, so an adaptive
side shrinks while workers hold results a client still needs: it must move them (retire, not kill)
or keep the workers that hold them.

Each side reports, besides :func:`bursty.run`'s wall time, core-seconds held and worker starts:
recomputed tasks (a task that ran more than once, or never) and lost keys: held results that at the
end are not ``finished``, whose value is wrong, or that had to be computed again. A combining task
checks its inputs, so a wrong input shows up as an errored (lost) key. :func:`measure` gives the
rows; ``bench.py`` runs it (``--only bursty-data``) with its own side runner (``bursty_side``).
"""

from __future__ import annotations

import functools
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import bursty

NBYTES = 128 * 1024  # each task's result: the script's 395 tasks hold 49 MiB, twice over in one 512 MiB worker
SEED = 22  # bursty.py's script, so the two rows play the same bursts
FAN_IN = 4


@dataclass(frozen=True)
class DataBurst:
    """A :class:`bursty.Burst` whose first ``len(inputs)`` tasks each read the earlier results ``inputs[j]``."""

    burst: bursty.Burst
    inputs: tuple[tuple[int, ...], ...]


def script(seed: int = SEED, fan_in: int = FAN_IN, share: float = 0.5, **kwargs) -> list[DataBurst]:
    """:func:`bursty.script` (``kwargs``), with ``share`` of every burst after the first reading ``fan_in`` earlier results."""
    rng = random.Random(seed + 1)
    held: list[int] = []
    out = []
    for burst in bursty.script(seed, **kwargs):
        readers = int(len(burst.durations) * share) if held else 0
        inputs = tuple(tuple(sorted(rng.sample(held, min(fan_in, len(held))))) for _ in range(readers))
        held.extend(range(len(held), len(held) + len(burst.durations)))
        out.append(DataBurst(burst, inputs))
    return out


def value(task_id: int, nbytes: int = NBYTES) -> bytes:
    """The result of task ``task_id``: what the client checks at the end."""
    return task_id.to_bytes(4, "little") * (nbytes // 4)


def produce(task_id: int, seconds: float, nbytes: int) -> bytes:
    """A task of a burst: sleep, log its id (as :func:`bursty.nap` does), return its data."""
    bursty.nap(task_id, seconds)
    return value(task_id, nbytes)


def combine(task_id: int, seconds: float, nbytes: int, input_ids: tuple[int, ...], parts: list[bytes]) -> bytes:
    """A task that reads earlier results: fails if any of them is not what its task returned."""
    wrong = [i for i, part in zip(input_ids, parts) if part != value(i, nbytes)]
    if wrong or len(parts) != len(input_ids):
        raise ValueError(f"task {task_id}: inputs {wrong} are not what their tasks returned")
    return produce(task_id, seconds, nbytes)


def run(
    client, bursts: list[DataBurst], log: Callable[[str], None] = print, adaptive: bool = True, tail: float = 60.0
) -> dict[str, Any]:
    """Play ``bursts`` on the cluster behind ``client``, holding every result; the figures of one side.

    Held core-seconds are counted from the first submit until the last burst is done, and on an
    ``adaptive`` side until it is down to the one worker the held data needs (at most ``tail`` s).
    The results are checked after that, outside the counted time.
    """
    from distributed import wait

    sampler = bursty.Sampler(client)
    held: dict[int, Any] = {}
    try:
        time.sleep(1.0)  # a few samples of the cluster at rest first
        t0 = time.monotonic()
        for i, data_burst in enumerate(bursts):
            durations, inputs = data_burst.burst.durations, data_burst.inputs
            ids = list(range(len(held), len(held) + len(durations)))
            start = time.monotonic()
            futures = client.map(
                combine, ids[: len(inputs)], durations[: len(inputs)], [NBYTES] * len(inputs), inputs,
                [[held[k] for k in ins] for ins in inputs], pure=False,
            )  # fmt: skip
            futures += client.map(
                produce, ids[len(inputs) :], durations[len(inputs) :], [NBYTES] * (len(ids) - len(inputs)), pure=False
            )
            with client.as_current():  # the bench's clients are not the default one
                wait(futures)  # done, not gathered: the data stays on the workers
            held.update(zip(ids, futures))
            end = time.monotonic()
            log(
                f"  burst {i + 1}/{len(bursts)}: {len(ids)} tasks ({len(inputs)} reading {FAN_IN} earlier results), "
                f"{len(held)} results held, in {end - start:.1f} s"
            )
            if i < len(bursts) - 1:
                time.sleep(data_burst.burst.gap)
        wall = time.monotonic() - t0
        t_end = t0 + wall
        deadline = t_end + tail
        while adaptive and time.monotonic() < deadline:  # the shrink after the last burst is held time too
            time.sleep(bursty.SAMPLE_INTERVAL)
            if sampler.samples and sampler.samples[-1][0] > t_end and len(sampler.samples[-1][1]["workers"]) <= 1:
                t_end = sampler.samples[-1][0]
                break
        else:
            t_end = time.monotonic() if adaptive else t_end
    finally:
        sampler.close()
    executed = Counter(task_id for _, task_id in client.get_events(bursty.EXECUTED))
    status = {task_id: future.status for task_id, future in held.items()}
    finished = [task_id for task_id, s in status.items() if s == "finished"]
    values = dict(zip(finished, client.gather([held[t] for t in finished], errors="skip")))
    lost = {t for t in held if status[t] != "finished" or values.get(t) != value(t) or executed[t] != 1}
    del held, values
    starts = sum(
        1 for _, event in client.get_events("all") if isinstance(event, dict) and event.get("action") == "add-worker"
    )
    gaps = sum(b.burst.gap for b in bursts[:-1])
    return {
        "wall": wall,
        "held": sampler.core_seconds(t0, t_end),
        "tasks": sum(sum(b.burst.durations) for b in bursts),
        "gaps": gaps,
        "starts": starts,
        "recomputed": sum(n - 1 for n in executed.values()) + sum(1 for t in status if not executed[t]),
        "lost": len(lost),
        "not_finished": sum(1 for s in status.values() if s != "finished"),
        "idle_nothing_waiting": sampler.core_seconds(
            t0, t_end, lambda t, a, gpu, processing, waiting: not processing and not waiting
        ),
    }


SIDES = ("fixed", "distributed Adaptive", "clustermgr")


def measure(args, tmp, server, stream, row: Callable[..., dict], side: Callable[..., dict]) -> list[dict]:
    """The rows: each side (``bench.bursty_side(name, tmp, server, stream, bursts, play)``) plays the same script.

    ``--smoke``: a small script on clustermgr alone (no LocalCluster to spawn), as the bursty rows do.
    """
    if args.smoke:
        bursts = script(bursts=2, tasks=(8, 12), sleep=(0.1, 0.3), gaps=(1.0, 2.0))
        names: tuple[str, ...] = ("clustermgr",)
    else:
        bursts, names = script(), SIDES
    play = functools.partial(run, tail=20.0 if args.smoke else 60.0)
    results = {name: side(name, tmp, server, stream, bursts, play=play) for name in names}  # each notes its load
    nothing = {"wall": float("nan"), "held": float("nan"), "load": 0.0}
    fixed, theirs, ours = (results.get(n, nothing) for n in SIDES)
    tasks = ours["tasks"]
    prefix = "bursty, data held:"

    def note(r: dict) -> str:
        return f"load average {r['load']:.1f}"

    rows = [
        row(f"{prefix} tasks' own core-seconds", tasks, "core-s"),
        row(
            f"{prefix} floor of core-s held / tasks' own (one thread holds the data through every gap)",
            (tasks + ours["gaps"]) / tasks,
            "x",
        ),
    ]
    for name, r in results.items():
        rows += [
            row(f"{prefix} wall time, {name}", r["wall"], "s", note=note(r)),
            row(f"{prefix} core-seconds held, {name}", r["held"], "core-s", note=note(r)),
            row(f"{prefix} core-s held idle with nothing waiting, {name}", r["idle_nothing_waiting"], "core-s"),
            row(f"{prefix} worker starts, {name}", r["starts"], "workers"),
        ]
    compared = [
        ("clustermgr wall / fixed", ours["wall"] / fixed["wall"], 1.05, note(ours)),
        ("clustermgr core-s held / tasks' own", ours["held"] / tasks, 1.10, note(ours)),
        ("distributed Adaptive wall / fixed", theirs["wall"] / fixed["wall"], None, note(theirs)),
        ("distributed Adaptive core-s held / tasks' own", theirs["held"] / tasks, None, note(theirs)),
        ("wall, clustermgr / distributed Adaptive", ours["wall"] / theirs["wall"], 1.0, ""),
        ("core-s held, clustermgr / distributed Adaptive", ours["held"] / theirs["held"], 1.0, ""),
    ]
    rows += [row(f"{prefix} {name}", v, "x", target, note=why) for name, v, target, why in compared if v == v]
    for name, r in results.items():  # a target on clustermgr's; the others are figures beside it
        target = 0 if name == "clustermgr" else None
        rows.append(row(f"{prefix} recomputed tasks, {name}", r["recomputed"], "tasks", target))
        rows.append(
            row(f"{prefix} lost keys, {name}", r["lost"], "keys", target, note=f"{r['not_finished']} not finished")
        )
    return rows
