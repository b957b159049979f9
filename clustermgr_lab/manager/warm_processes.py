"""When the warm launcher and the standby schedulers run: from the first use of clusters until none is left.

A server that never makes a cluster starts neither: it costs no process. The first use (a create,
the sidebar's template listing or stream subscription) starts the launcher, or reaches the one a
previous server left running for its kept clusters, then fills the standby schedulers. Once the
last cluster has left the list, and none came back for ``WarmLauncher.release_after`` seconds,
the server stops its standby schedulers and lets go of the launcher, which exits after its own
``idle_timeout`` (it stays while it still runs processes, e.g. clusters kept for another server).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from clustermgr_lab.backends import StandbySchedulers, WarmLauncher


class WarmProcesses:
    """Starts the warm launcher and standby schedulers on first use, and lets them go once no cluster is left.

    Parameters
    ----------
    launcher, standby : WarmLauncher, StandbySchedulers
        The server's connection to its launcher, and its standby schedulers.
    busy : callable
        True while a cluster that may need them is listed (not stopped or failed).
    log : logging.Logger
    """

    def __init__(
        self, launcher: WarmLauncher, standby: StandbySchedulers, busy: Callable[[], bool], log: logging.Logger
    ):
        self.launcher, self.standby, self._busy, self.log = launcher, standby, busy, log
        self._in_use = False
        self._warming: asyncio.Task | None = None
        self._releasing: asyncio.Task | None = None
        self._release_timer: asyncio.TimerHandle | None = None

    @property
    def in_use(self) -> bool:
        """True from the first use until they are let go."""
        return self._in_use

    def first_use(self) -> None:
        """Start (or reach) the launcher and fill the standby schedulers in the background, unless done already."""
        self._cancel_release()
        if self._in_use or not self.launcher.enabled:
            return
        self._in_use = True
        self._warming = asyncio.ensure_future(self._warm_up())

    async def _warm_up(self) -> None:
        if self._releasing is not None:  # let go a moment ago: that ends first
            await asyncio.gather(self._releasing, return_exceptions=True)
        await self.launcher.warm_up()
        if self._in_use:
            self.standby.fill()
            self.release_when_unused()  # a sidebar opened, and no cluster was made after all

    def _holding(self) -> bool:
        """True while they run for this server: since a first use, or since a cluster's scale reached the launcher."""
        return self._in_use or self.launcher.connected

    def release_when_unused(self) -> None:
        """A cluster left the list (or ended): while none needs them, let them go after ``release_after`` seconds."""
        if not self._holding() or self._release_timer is not None or self._busy():
            return
        self._release_timer = asyncio.get_running_loop().call_later(
            self.launcher.release_after, self._release_if_unused
        )

    def _release_if_unused(self) -> None:
        self._release_timer = None
        if not self._holding() or self._busy():
            return
        self._in_use = False
        self._releasing = asyncio.ensure_future(self._release())

    async def _release(self) -> None:
        if self._warming is not None:
            await asyncio.gather(self._warming, return_exceptions=True)
        await self.standby.release()
        await self.launcher.release()
        self.log.info("clustermgr: no cluster left; the warm launcher and standby schedulers are let go")

    def _cancel_release(self) -> None:
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None

    async def close(self) -> None:
        """At the server's stop: stop the standby schedulers and disconnect (the launcher keeps what was kept)."""
        self._cancel_release()
        await asyncio.gather(*(t for t in (self._warming, self._releasing) if t is not None), return_exceptions=True)
        await self.standby.close()
        await self.launcher.close()
