"""Whether someone uses the extension now: an API request a moment ago, or the sidebar's push stream open.

Work done only for someone looking (asking the templates' resources, e.g. a dask-gateway server every
two seconds) waits until someone does: a server nobody uses costs nothing and asks nothing.

>>> attention = Attention(subscribers=lambda: 0)
>>> attention.watched(grace=60)
False
>>> attention.noticed()
>>> attention.watched(grace=60)
True
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Attention:
    """When the API was last used, and the push stream's subscribers.

    Parameters
    ----------
    subscribers : callable
        How many subscribers the push stream has now (the sidebars open on this server).
    """

    def __init__(self, subscribers: Callable[[], int]):
        self._subscribers = subscribers
        self._last = float("-inf")
        self._noticed: asyncio.Event | None = None

    def noticed(self) -> None:
        """An authenticated request to the API, or a subscriber of the push stream: someone uses it now."""
        self._last = time.monotonic()
        if self._noticed is not None:
            self._noticed.set()

    def watched(self, grace: float) -> bool:
        """Whether the stream has a subscriber, or the API was used within the last ``grace`` seconds."""
        return self._subscribers() > 0 or time.monotonic() - self._last < grace

    async def until_watched(self, grace: float) -> None:
        """Return at once if :meth:`watched`, else at the next :meth:`noticed`."""
        while not self.watched(grace):
            if self._noticed is None:
                self._noticed = asyncio.Event()
            self._noticed.clear()
            await self._noticed.wait()
