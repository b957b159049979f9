"""Timeline sampling: every few seconds, a cluster's connected workers, their memory and CPU, into its timeline."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.timeline import Timeline

log = logging.getLogger(__name__)


class TimelineSampler:
    """Adds a point to a :class:`~clustermgr_lab.domain.timeline.Timeline` every ``interval`` seconds while started.

    Parameters
    ----------
    cluster_id : str
        For log lines.
    interval : float
        Seconds between two samples (also the timeline's resolution).
    link : callable
        The cluster's scheduler link now (or None); its ``worker_metrics()`` gives memory and CPU per worker.
    observed : callable
        The workers the scheduler lists now (their ``memory_limit``).
    """

    def __init__(
        self, cluster_id: str, interval: float, link: Callable[[], Any], observed: Callable[[], list[dict]]
    ) -> None:
        self.cluster_id = cluster_id
        self.interval = interval
        self.timeline = Timeline(resolution=interval)
        self._link = link
        self._observed = observed
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._sample_forever())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _sample_forever(self) -> None:
        while True:
            try:
                await self.sample()
            except asyncio.CancelledError:
                raise
            except Exception:  # one failed sample (e.g. the scheduler is busy) must not end sampling
                log.debug("cluster %s: could not sample its workers", self.cluster_id, exc_info=True)
            await asyncio.sleep(self.interval)

    async def sample(self) -> None:
        """Add one point: connected workers, their memory in use and limit, CPU in use (cores)."""
        link = self._link()
        read = getattr(link, "worker_metrics", None)  # a foreign scheduler's link does not have it
        observed = self._observed()
        measured = await read() if read is not None and link.responsive and observed else {}
        self.timeline.add(
            time.time(),
            workers=len(observed),
            memory=sum(m["memory"] for m in measured.values()),
            memory_limit=sum(float(info.get("memory_limit") or 0) for info in observed),
            cpu=sum(m["cpu"] for m in measured.values()) / 100,
        )
