"""What a restarted server makes of a stored cluster: re-adopted, attached again, or ended with the reason.

Mixed into :class:`~.managed.ManagedCluster`: its scheduler answers at the stored address with the
stored id (re-adopted: workers that still run are counted, adaptive mode resumes), is silent (kept,
tried again every :data:`READOPT_RETRY_SECONDS`), or is gone or another (``failed``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, SchedulerEndpoint
from clustermgr_lab.cluster.events import WARNING
from clustermgr_lab.cluster.hosted_link import HostGone, hosted_scheduler_identity
from clustermgr_lab.cluster.scheduler_link import scheduler_identity
from clustermgr_lab.cluster.states import FAILED, PENDING, RUNNING, SCHEDULER_SILENT, STOPPED, STOPPING, reason_of
from clustermgr_lab.domain.errors import SchedulerTimeout

log = logging.getLogger(__name__)

#: Seconds between two tries to reach a scheduler that did not answer when the server started.
READOPT_RETRY_SECONDS = 2.0
#: Seconds a scheduler has to answer the identity call of a re-adoption.
SCHEDULER_ANSWER_SECONDS = 10.0


class Readoption:
    """The re-adoption half of :class:`~.managed.ManagedCluster` (which provides every attribute used here)."""

    async def readopt(self, record: Mapping[str, Any]) -> None:
        """Re-adopt a stored cluster after a server restart, or fail it and stop what is left of it.

        Re-adopted when its scheduler answers at the stored address with the stored scheduler id:
        workers that still run are counted (not started again), adaptive mode resumes. Otherwise
        the cluster ends ``failed`` with the reason (or ``stopped``, when its scheduler shut itself
        down for being idle), and its processes or jobs that still run are stopped. A backend that
        attaches to a scheduler started elsewhere is attached again instead (:meth:`reattach`).
        """
        if self.backend.attaches:
            await self.reattach()
            return
        records = {w["name"]: w["process"] for w in record.get("workers", []) if w.get("process")}
        if (record.get("backend_state") or {}).get(SCHEDULER_PROCESS):
            records[SCHEDULER_PROCESS] = record["backend_state"][SCHEDULER_PROCESS]
        endpoint = self.endpoint or SchedulerEndpoint("", None)
        stored_lifecycle = self.lifecycle
        # What ran when the last server stopped counts while no server watched only if it is re-adopted.
        last_seen, last_rates, readopt_started = self.usage.as_of, self.usage.rates, time.time()
        self.usage.rates = {}
        try:
            alive = await self.backend.adopt(endpoint, records)
        except Exception as exc:
            log.exception("cluster %s: could not adopt its processes", self.id)
            await self._fail(f"could not re-adopt its processes: {exc}")
            return
        self.reconciler.keep_only(alive)
        if stored_lifecycle in (FAILED, STOPPED, STOPPING):
            self.lifecycle = stored_lifecycle
            await self._teardown()
            self._changed()
            return
        silent, reason = await self._scheduler_mismatch()
        if silent:  # connected, but no answer in time: stopped, swapping, in a long pause; not gone
            self.lifecycle = RUNNING
            self.error = (
                f"{SCHEDULER_SILENT} since the server started ({reason}; stopped or overloaded?): its cluster is "
                "kept as it was, and re-adopted once the scheduler answers"
            )
            self.events.lifecycle(self.error, level=WARNING)
            self._awaiting_scheduler = asyncio.ensure_future(
                self._await_scheduler(last_seen, last_rates, readopt_started)
            )
            self._changed()
            return
        await self._resume(reason, last_seen, last_rates, readopt_started)

    async def _await_scheduler(self, last_seen, last_rates, readopt_started: float) -> None:
        """Try the silent scheduler again until it answers (re-adopted) or is gone or another (failed)."""
        while True:
            await asyncio.sleep(READOPT_RETRY_SECONDS)
            silent, reason = await self._scheduler_mismatch()
            if not silent:
                break
        self._awaiting_scheduler = None
        if reason is None:
            self.events.lifecycle("the scheduler answers again")
            self.error = None
        await self._resume(reason, last_seen, last_rates, readopt_started)

    async def _resume(self, reason: str | None, last_seen, last_rates, readopt_started: float) -> None:
        """Re-adopt a cluster whose scheduler answered with its stored id (``reason`` None), else end it."""
        if reason is not None:
            if self._shut_down_for_idleness():
                await self._idle_stopped()
            else:
                await self._fail(reason)
            return
        try:
            self._link = self._new_link()
            await self._link.start()
        except Exception as exc:
            await self._fail(f"could not reconnect to the scheduler at {self.endpoint.address}: {exc}")
            return
        self.lifecycle = RUNNING
        if last_seen is not None:
            self.usage.accrue(last_rates, last_seen, readopt_started)
        counts = self.worker_counts()
        self.events.lifecycle(
            f"re-adopted after a server restart: scheduler {self.endpoint.address}, "
            f"{counts['running']} workers running, {counts['pending']} starting"
            + (", adaptive mode resumed" if self.adapt else "")
        )
        self.reconciler.start()
        self.adaptive.start()
        self.sampler.start()
        self._changed()

    async def reattach(self) -> None:
        """Attach a stored external cluster again after a server restart, when its scheduler answers with its stored id.

        Otherwise it ends ``failed`` with the reason; it is never stopped (it is not ours).
        """
        if self.lifecycle != PENDING:  # stored failed or stopped: listed as it was, until restarted or removed
            self._released.set()
            return
        stored_id = self.endpoint.scheduler_id if self.endpoint else None
        try:
            endpoint = await self.backend.start_scheduler()
        except Exception as exc:
            await self._fail(f"could not attach it again after the server restarted: {reason_of(exc)}")
            return
        if stored_id and endpoint.scheduler_id != stored_id:
            await self._fail(
                f"{endpoint.address} now answers with another scheduler (id {endpoint.scheduler_id}, not {stored_id})"
            )
            return
        self.endpoint = endpoint
        try:
            self._link = self._new_link()
            await self._link.start()
        except Exception as exc:
            await self._fail(f"could not attach it again after the server restarted: {reason_of(exc)}")
            return
        self.lifecycle = RUNNING
        self.events.lifecycle(f"attached again after a server restart: scheduler {endpoint.address}")
        self.reconciler.start()
        self.adaptive.start()
        self._changed()

    async def _scheduler_mismatch(self) -> tuple[bool, str | None]:
        """``(silent, why)``: why the stored scheduler cannot be re-adopted (None: it answers with its stored id).

        ``silent``: it took the connection but did not answer in time (stopped, swapping, a long pause): not gone.
        """
        if self.endpoint is None or not self.endpoint.address:
            return False, "the server stopped before the scheduler had started"
        host = self._link_host()
        try:
            if host is not None:
                identity = await hosted_scheduler_identity(
                    host, self.endpoint.address, SCHEDULER_ANSWER_SECONDS, security=self.backend.security
                )
            else:
                identity = await scheduler_identity(
                    self.endpoint.address, SCHEDULER_ANSWER_SECONDS, security=self.security()
                )
        except (asyncio.TimeoutError, SchedulerTimeout, HostGone):
            return True, f"no answer from {self.endpoint.address} within {SCHEDULER_ANSWER_SECONDS:g} s"
        except OSError as exc:
            return False, f"its scheduler at {self.endpoint.address} is gone ({exc or type(exc).__name__})"
        if identity.get("id") != self.endpoint.scheduler_id:
            return False, (
                f"{self.endpoint.address} now answers with another scheduler "
                f"(id {identity.get('id')}, not {self.endpoint.scheduler_id})"
            )
        return False, None
