"""How much a slow subscriber may hold: bytes queued for one connection and not yet written to its socket.

A subscriber that stops reading makes the server queue every message for it (tornado's write
buffer grows without bound); past the budget the connection is given up instead, and the
subscriber gets a fresh snapshot when it reconnects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable


class SendBudget:
    """Counts the bytes of messages handed to a connection whose writes have not completed.

    Parameters
    ----------
    limit : int
        Most bytes that may wait. One message is always let through when nothing waits, however large.

    Examples
    --------
    >>> import asyncio
    >>> budget = SendBudget(limit=10)
    >>> loop = asyncio.new_event_loop()
    >>> [budget.send(lambda text: loop.create_future(), "x" * 6) for _ in range(3)]  # writes that never complete
    [True, False, False]
    >>> budget.waiting
    6
    >>> loop.close()
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.waiting = 0

    def send(self, write: Callable[[str], Awaitable[None]], text: str) -> bool:
        """Hand ``text`` to ``write`` (which returns a future done once it is written), or refuse: False."""
        size = len(text)
        if self.waiting and self.waiting + size > self.limit:
            return False
        future = write(text)
        self.waiting += size

        def written(done) -> None:
            self.waiting -= size
            if not done.cancelled():
                done.exception()  # a closed stream: nothing to report; the close handler unsubscribes

        future.add_done_callback(written)
        return True
