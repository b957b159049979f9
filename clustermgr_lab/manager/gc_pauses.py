"""The garbage collector's pauses in the server process: objects alive at start-up are left out of full collections."""

from __future__ import annotations

import gc
import logging


def freeze_startup_objects(log: logging.Logger) -> int:
    """Collect once, then move every object alive now out of the collector's reach (:func:`gc.freeze`).

    Called once the server has started: what is alive then (modules, classes, the server's and its extensions'
    state) lives as long as the server, and a full collection would otherwise scan it every time. With 100
    clusters and 20 stream subscribers on a 2-core machine, a full collection held the event loop for 166 ms
    (251,000 objects); after this, 16 ms (8,000). Reference counting still frees these objects; only cycles
    among them are no longer collected. Returns how many objects were moved.

    Examples
    --------
    >>> import logging
    >>> freeze_startup_objects(logging.getLogger("doctest")) > 0
    True
    >>> gc.unfreeze()
    """
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("clustermgr_lab: %d objects alive at start-up are left out of full garbage collections", frozen)
    return frozen
