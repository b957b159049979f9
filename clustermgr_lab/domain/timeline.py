"""A cluster's workers, memory and CPU in use over its whole life, in bounded memory (downsampled as it grows).

Samples (from the scheduler, every few seconds) fall into buckets of ``resolution`` seconds, each
keeping the mean of its samples. When there are more than ``capacity`` buckets, neighbours are
merged pairwise and the resolution doubles: a cluster of an hour and one of a month both take at
most ``capacity`` points, the month's coarser.
"""

from __future__ import annotations

import datetime
from typing import Any

FIELDS = ("workers", "memory", "memory_limit", "cpu")


class Timeline:
    """Bucketed means of ``(workers, memory, memory_limit, cpu)`` samples.

    Parameters
    ----------
    resolution : float
        The first bucket width, in seconds (the sampling interval is a good choice).
    capacity : int
        Most buckets kept; an even number of at least 2.

    Examples
    --------
    >>> timeline = Timeline(resolution=1, capacity=4)
    >>> for t in range(10):
    ...     timeline.add(t, workers=t, memory=0, memory_limit=0, cpu=0)
    >>> timeline.resolution, [p["workers"] for p in timeline.to_dict()["points"]]
    (4, [1.5, 5.5, 8.5])
    """

    def __init__(self, resolution: float = 5.0, capacity: int = 240):
        self.resolution = resolution
        self.capacity = max(2, capacity - capacity % 2)
        self._buckets: list[list[float]] = []  # [start, n, *sums of FIELDS]

    def add(self, time: float, **values: float) -> None:
        """Add one sample taken at ``time`` (POSIX seconds)."""
        row = [float(values[name]) for name in FIELDS]
        start = time - time % self.resolution
        if self._buckets and self._buckets[-1][0] >= start:
            last = self._buckets[-1]
            last[1] += 1
            for i, value in enumerate(row):
                last[2 + i] += value
            return
        self._buckets.append([start, 1, *row])
        while len(self._buckets) > self.capacity:
            self._downsample()

    def _downsample(self) -> None:
        self.resolution *= 2
        merged: list[list[float]] = []
        for bucket in self._buckets:
            start = bucket[0] - bucket[0] % self.resolution
            if merged and merged[-1][0] == start:
                target = merged[-1]
                for i in range(1, len(bucket)):
                    target[i] += bucket[i]
            else:
                merged.append([start, *bucket[1:]])
        self._buckets = merged

    def __len__(self) -> int:
        return len(self._buckets)

    def to_dict(self) -> dict[str, Any]:
        """``{"resolution": seconds, "points": [{"time", "workers", "memory", "memory_limit", "cpu"}]}``, oldest first.

        ``time`` is the bucket's start (ISO 8601, UTC); the values are the means of its samples.
        """
        points = []
        for start, n, *sums in self._buckets:
            time = datetime.datetime.fromtimestamp(start, datetime.timezone.utc).isoformat()
            points.append({"time": time, **{name: round(total / n, 3) for name, total in zip(FIELDS, sums)}})
        return {"resolution": self.resolution, "points": points}
