"""Standby schedulers: idle TLS schedulers the warm launcher keeps ready, each handed whole to the next local cluster.

A local cluster's create spends most of its time in the scheduler's start-up (fork, dashboard,
listening) before and while its workers start. :class:`StandbySchedulers` starts up to ``count``
of them ahead of time (from the first use of the server's clusters on, until none is left: see
:mod:`clustermgr_lab.manager.warm_processes`), each in a folder of its own named like a cluster
id, with TLS credentials of its own made for it alone (``<folder>/tls``). The next cluster of the
``local`` backend with TLS takes one whole: the folder becomes the cluster's work folder and its
id the cluster's id, so the scheduler's log, scheduler file and credentials are already where the
cluster keeps them, and no two clusters ever share credentials. A replacement starts
``refill_delay`` seconds later (not while the new cluster's workers start).

No orphans: a standby is forked from the warm launcher only (never as a plain process) and
*tied* to this server's connection to it, so the launcher stops it if the server goes away
without stopping it (a crash, SIGKILL); :meth:`StandbySchedulers.close` stops them and removes
their folders at a clean stop; one taken by a cluster is untied (it is the cluster's now, and
may outlive the server like any other). Folders left by a server that crashed are removed when
the next one starts.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from traitlets import Float, Int
from traitlets.config import LoggingConfigurable

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, SchedulerEndpoint
from clustermgr_lab.backends.local.launcher import WarmLauncher
from clustermgr_lab.backends.local.processes import LocalProcesses, TrackedProcess
from clustermgr_lab.backends.local.scheduler import LocalScheduler
from clustermgr_lab.common.security import ClusterCredentials, private_folder

log = logging.getLogger(__name__)

#: A file in a standby's folder until a cluster takes it: such folders are a standby's, never a cluster's.
MARKER = "standby"


@dataclass
class Standby:
    """One ready scheduler: the cluster id and folder it will give its cluster, its credentials, where it listens."""

    cluster_id: str
    workdir: Path
    credentials: ClusterCredentials
    processes: LocalProcesses
    endpoint: SchedulerEndpoint
    #: Its process, once taken (the cluster's backend tracks it from then on).
    taken: TrackedProcess | None = None

    def running(self) -> bool:
        tracked = self.processes.get(SCHEDULER_PROCESS)
        return tracked is not None and tracked.running()


class StandbySchedulers(LoggingConfigurable):
    """Up to ``count`` idle TLS schedulers kept ready for the next clusters of the ``local`` backend.

    Only the ``local`` backend takes them (batch, SSH and the other backends start their schedulers
    on demand, as before), and only for a template with TLS.
    """

    count = Int(
        1,
        min=0,
        max=4,
        config=True,
        help="Idle schedulers (with TLS credentials of their own) the warm launcher keeps ready for the next "
        "clusters of the local backend: a create then skips the scheduler's start-up. Each costs one idle "
        "process (about 30 MiB, well under 1 % of a core). 0: none. Batch, SSH and the other backends never "
        "use one. Needs the warm launcher (WarmLauncher.enabled).",
    )
    refill_delay = Float(
        2.0,
        min=0.0,
        config=True,
        help="Seconds after a standby scheduler was taken before its replacement starts (so that it does not "
        "compete for CPU with the workers of the cluster that took it).",
    )
    retry_after = Float(
        60.0, min=1.0, config=True, help="Seconds before trying again after a standby scheduler failed to start."
    )
    start_timeout = Float(60.0, config=True, help="Seconds a standby scheduler gets to write its address.")
    stop_timeout = Float(10.0, config=True, help="Seconds a standby scheduler gets after SIGTERM before SIGKILL.")

    def __init__(
        self,
        workdir: Path,
        launcher: WarmLauncher,
        make_credentials: Callable[[ClusterCredentials], Awaitable[None]] | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.workdir = Path(workdir)
        self.launcher = launcher
        # how each standby's TLS credentials are made (the server's: in the scheduler links' process); else here
        self._make_credentials = make_credentials or _make_in_executor
        self._ready: list[Standby] = []
        self._filling: asyncio.Task | None = None
        self._closed = False
        self._leftovers_removed = False

    @property
    def enabled(self) -> bool:
        return self.count > 0 and self.launcher.enabled and not self._closed

    def ready(self) -> list[Standby]:
        """The standby schedulers ready now."""
        return [s for s in self._ready if s.running()]

    def remove_leftovers(self) -> list[Path]:
        """Remove the folders of standby schedulers a previous server left (it stopped without closing them).

        Blocking (called in an executor before the first standby starts). Their schedulers were tied to
        that server's connection, so the launcher has stopped them.
        """
        removed = []
        for marker in self.workdir.glob(f"*/{MARKER}"):
            shutil.rmtree(marker.parent, ignore_errors=True)
            removed.append(marker.parent)
        return removed

    def fill(self, delay: float = 0.0) -> None:
        """Start standby schedulers in the background until ``count`` are ready (after ``delay`` seconds)."""
        if self.enabled and (self._filling is None or self._filling.done()):
            self._filling = asyncio.ensure_future(self._fill(delay))

    async def _fill(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        if not self._leftovers_removed:  # here: one filling task at a time, so never a folder being made
            self._leftovers_removed = True
            for folder in await asyncio.get_running_loop().run_in_executor(None, self.remove_leftovers):
                self.log.info("clustermgr: removed %s, a standby scheduler's folder a previous server left", folder)
        while self.enabled and len(self.ready()) < self.count:
            try:
                self._ready.append(await self._start_one())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.log.warning(
                    "clustermgr: a standby scheduler did not start (%s); trying again in %g s", exc, self.retry_after
                )
                await asyncio.sleep(self.retry_after)

    async def _start_one(self) -> Standby:
        loop = asyncio.get_running_loop()
        cluster_id = uuid.uuid4().hex[:8]
        workdir = private_folder(self.workdir / cluster_id)
        (workdir / MARKER).touch()
        credentials = ClusterCredentials.in_folder(workdir)
        processes = LocalProcesses(workdir, self.launcher, on_exit=lambda *_: self._exited(), tied=True)
        try:
            await self._make_credentials(credentials)
            endpoint = await LocalScheduler(processes, credentials).start(
                host="127.0.0.1",
                interface=None,
                idle_timeout=None,  # the cluster that takes it sets its own (see ManagedCluster.start)
                timeout=self.start_timeout,
                stop_timeout=self.stop_timeout,
            )
        except BaseException:
            await processes.stop_all(self.stop_timeout)
            await loop.run_in_executor(None, shutil.rmtree, workdir, True)
            raise
        self.log.info("clustermgr: standby scheduler %s ready at %s", cluster_id, endpoint.address)
        return Standby(cluster_id, workdir, credentials, processes, endpoint)

    def _exited(self) -> None:
        """A standby scheduler ended on its own: forget it (and its folder), start another after ``retry_after``."""
        gone = [s for s in self._ready if not s.running()]
        self._ready = [s for s in self._ready if s not in gone]
        for standby in gone:
            self.log.warning(
                "clustermgr: standby scheduler %s exited: %s",
                standby.cluster_id,
                standby.processes.log_tail(SCHEDULER_PROCESS, 5),
            )
            asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, standby.workdir, True)
        if gone:
            self.fill(self.retry_after)

    def take(self) -> Standby | None:
        """A ready standby scheduler for a new cluster (None when there is none); its replacement starts later.

        The caller makes its cluster of the standby's ``cluster_id``, ``workdir`` and ``credentials``
        and hands it to the backend (``LocalBackend(standby=...)``), which tracks its process from then on.
        """
        while self._ready:
            standby = self._ready.pop(0)
            if not standby.running():
                continue
            (standby.workdir / MARKER).unlink(missing_ok=True)
            standby.taken = standby.processes.get(SCHEDULER_PROCESS)
            asyncio.ensure_future(self._untie(standby.taken.pid, standby.cluster_id))
            self.fill(self.refill_delay)
            return standby
        self.fill(self.refill_delay)
        return None

    def discard(self, standby: Standby) -> None:
        """Stop a taken standby scheduler whose cluster could not be made, and remove its folder."""
        if standby.taken is not None:
            standby.taken.signal_group(signal.SIGTERM)
        asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, standby.workdir, True)

    async def _untie(self, pid: int, cluster_id: str) -> None:
        if not await self.launcher.untie(pid):
            self.log.warning(
                "clustermgr: could not tell the launcher that scheduler %s belongs to cluster %s now "
                "(it stops with this server's connection)",
                pid,
                cluster_id,
            )

    async def close(self) -> None:
        """Stop every standby scheduler and remove its folder (at a clean server stop)."""
        self._closed = True
        await self.release()

    async def release(self) -> None:
        """Stop every standby scheduler and remove its folder; :meth:`fill` starts new ones later.

        When no cluster is left (see ``WarmLauncher.release_after``), and at a clean server stop.
        """
        if self._filling is not None:
            self._filling.cancel()
            await asyncio.gather(self._filling, return_exceptions=True)
        standbys, self._ready = self._ready, []
        await asyncio.gather(*(s.processes.stop_all(self.stop_timeout) for s in standbys), return_exceptions=True)
        loop = asyncio.get_running_loop()
        for standby in standbys:
            await loop.run_in_executor(None, shutil.rmtree, standby.workdir, True)


async def _make_in_executor(credentials: ClusterCredentials) -> None:
    await asyncio.get_running_loop().run_in_executor(None, credentials.make)
