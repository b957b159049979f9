"""Stopping background tasks for sure: cancel, and cancel again until the task has ended."""

from __future__ import annotations

import asyncio

#: How long to wait for a cancelled task before cancelling it again.
RECANCEL_AFTER = 1.0


async def cancel_and_wait(*tasks: asyncio.Future | None) -> None:
    """Cancel ``tasks`` (None is skipped) and return once every one has ended.

    A single ``cancel()`` is not enough on Python 3.11: ``asyncio.wait_for`` swallows a cancellation that
    arrives as the call it waits for completes (python/cpython#86296), and a polling loop built on it then
    goes on forever. So each task still running after :data:`RECANCEL_AFTER` seconds is cancelled again.

    Examples
    --------
    >>> async def main():
    ...     task = asyncio.ensure_future(asyncio.sleep(60))
    ...     await cancel_and_wait(task, None)
    ...     return task.cancelled()
    >>> asyncio.run(main())
    True
    """
    running = {task for task in tasks if task is not None}
    while running := {task for task in running if not task.done()}:
        for task in running:
            task.cancel()
        await asyncio.wait(running, timeout=RECANCEL_AFTER)
    for task in tasks:  # retrieve what they ended with: no "exception was never retrieved" warnings
        if task is not None and not task.cancelled():
            task.exception()
