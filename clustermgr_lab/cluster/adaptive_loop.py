"""Adaptive mode at run time: the periodic callback that reads the scheduler's load and feeds a policy's proposals to the plan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

from clustermgr_lab.cluster.events import EventLog
from clustermgr_lab.cluster.reconciler import Reconciler
from clustermgr_lab.domain.adaptive import AdaptivePolicy, AdaptOff, AdaptRange, AdaptSettings, Load, Proposal
from clustermgr_lab.domain.spec import WorkerSpec

log = logging.getLogger(__name__)

MIN_STEP_GAP = 0.1  # seconds: a flood of wake-ups (a loop of submits) costs at most ten load reads a second


class Policy(Protocol):
    """What the controller asks of a policy (:class:`~.adaptive.AdaptivePolicy` and its kin)."""

    def propose(
        self, spec: WorkerSpec, load: Load, members: dict[str, list[str]]
    ) -> tuple[list[Proposal], list[tuple[str, str]]]: ...


class AdaptiveController:
    """Owns adaptive mode's periodic callback: every ``settings.interval`` s, load -> policy -> plan.

    The policy only *decides*; its proposals go to :meth:`Reconciler.set_plan`, the same path as
    a manual scale. :meth:`wake` takes the next step at once (at most one step every
    :data:`MIN_STEP_GAP` s): the scheduler pushes a wake-up when work arrives or a worker runs out
    of it, so a burst does not wait for the interval to end.

    Parameters
    ----------
    cluster_id : str
        For log lines.
    reconciler : Reconciler
        Holds the plan the proposals change.
    events : EventLog
        Where held-back decisions are noted.
    read_load : callable
        ``await read_load(target_duration)``: the scheduler's load report (a dict), or an error.
    is_running : callable
        True while the cluster runs and its scheduler can be asked.
    on_change : callable
        Called after an observable change (a new note).
    policy_class : type, optional
        Makes the policy from the settings (default :class:`~.adaptive.AdaptivePolicy`).
    """

    def __init__(
        self,
        cluster_id: str,
        reconciler: Reconciler,
        events: EventLog,
        read_load: Callable[[float], Awaitable[dict[str, Any]]],
        is_running: Callable[[], bool],
        on_change: Callable[[], None],
        policy_class: Callable[[AdaptSettings], Policy] = AdaptivePolicy,
    ):
        self.cluster_id = cluster_id
        self.reconciler = reconciler
        self.events = events
        self._read_load = read_load
        self._is_running = is_running
        self._on_change = on_change
        self.policy_class = policy_class
        self.settings: AdaptSettings | None = None
        self.policy: Policy | None = None
        self._task: asyncio.Task | None = None
        self._held_notes: dict[str, str] = {}
        self._woken: asyncio.Event | None = None

    def configure(self, settings: AdaptSettings | None, *, run: bool) -> None:
        """Take new settings (None: adaptive mode off) with a fresh policy; run the callback if ``run``."""
        self.stop()
        self.settings = settings
        self.policy = self.policy_class(settings) if settings else None
        if settings and run:
            self.start()

    def change(self, change: AdaptSettings | AdaptOff | None, *, run: bool) -> None:
        """Turn adaptive mode on or change it (settings), off for one group (:class:`AdaptOff`), or off (None).

        Each change is logged as a lifecycle event; ``run``: the callback runs (the cluster runs).
        """
        if change is None:
            self.configure(None, run=run)
            self.events.lifecycle("adaptive mode turned off")
        elif isinstance(change, AdaptOff):
            if self.settings and self.settings.range_for(change.group):
                self.keep_ranges(lambda r: r.group != change.group, run=run)
                self.events.lifecycle(f"adaptive mode turned off for group {change.group}")
        else:
            self.configure(change, run=run)
            ranges = ", ".join(f"{r.group} {r.minimum}-{r.maximum} {r.unit}" for r in change.ranges)
            self.events.lifecycle(f"adaptive mode on: {ranges}")

    def keep_ranges(self, keep: Callable[[AdaptRange], bool], *, run: bool) -> None:
        """Drop the adaptive ranges ``keep`` refuses; adaptive mode goes off with the last one."""
        if self.settings is None:
            return
        ranges = tuple(r for r in self.settings.ranges if keep(r))
        self.configure(replace(self.settings, ranges=ranges) if ranges else None, run=run)

    def start(self) -> None:
        if self.settings is not None and self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def wake(self, why: str = "") -> None:
        """Take the next step now rather than at the end of the interval (work arrived, or ran out)."""
        if self._woken is not None:
            self._woken.set()

    async def _loop(self) -> None:
        # This loop's own event: a cancelled loop's clean-up runs after its successor has started.
        woken = self._woken = asyncio.Event()
        try:
            while self.settings is not None and self.policy is not None:
                woken.clear()
                if self._is_running():
                    try:
                        await self.step()
                    except asyncio.CancelledError:
                        raise
                    except Exception:  # one bad step must not end adaptive mode silently
                        log.exception("cluster %s: adaptive step failed", self.cluster_id)
                await asyncio.sleep(MIN_STEP_GAP)
                settings = self.settings
                if settings is None:  # adaptive mode was turned off during the step
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(woken.wait(), max(0.0, settings.interval - MIN_STEP_GAP))
        finally:
            if self._woken is woken:
                self._woken = None

    async def step(self) -> None:
        """One tick: read the load, ask the policy, set the plans it proposes, note what it holds back."""
        try:
            load = Load.from_dict(await self._read_load(self.settings.target_duration))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("cluster %s: could not read the scheduler's load: %s", self.cluster_id, exc)
            return
        reconciler = self.reconciler
        proposals, notes = self.policy.propose(reconciler.spec, load, reconciler.members())
        for proposal in proposals:
            if proposal.after > proposal.before and proposal.group in reconciler.group_errors:
                notes.append((proposal.group, f"not growing: {reconciler.group_errors[proposal.group]}"))
                continue
            reconciler.set_plan(proposal.group, proposal.after, proposal.reason, source="adaptive")
        for group, note in notes:
            if self._held_notes.get(group) != note:
                self.events.note(group, note, source="adaptive")
                self._on_change()
        self._held_notes = dict(notes)
