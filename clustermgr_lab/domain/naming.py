"""Cluster names: the default name of a new cluster, and a name no other cluster has yet."""

from __future__ import annotations

from collections.abc import Collection

MAX_NAME = 80


def unique_name(base: str, taken: Collection[str]) -> str:
    """``base``, or ``base (2)``, ``base (3)``... whichever is not taken (at most 80 characters).

    >>> unique_name("Attached 10.0.0.1:8786", {"Attached 10.0.0.1:8786"})
    'Attached 10.0.0.1:8786 (2)'
    """
    n = 2
    name = base
    while name in taken:
        name = f"{base} ({n})"
        n += 1
    return name[:MAX_NAME]


def next_default_name(taken: Collection[str]) -> str:
    """The first of ``Cluster 1``, ``Cluster 2``... that is not taken.

    >>> next_default_name({"Cluster 1", "Cluster 3"})
    'Cluster 2'
    """
    n = 1
    while f"Cluster {n}" in taken:
        n += 1
    return f"Cluster {n}"
