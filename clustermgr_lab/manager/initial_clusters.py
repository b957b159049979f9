"""dask-labextension's ``labextension.initial`` clusters: started with the server, once, never duplicated.

dask-labextension reads a list of clusters from Dask's config and starts them when its server starts::

    labextension:
      initial:
        - name: "My Big Cluster"
          workers: 100
        - name: "Adaptive Cluster"
          adapt: {minimum: 0, maximum: 50}

Here each entry, over ``labextension.default`` (``{**default, **entry}``, as dask-labextension merges
them), becomes a create request once the stored clusters are re-adopted: ``name`` (else
``Initial cluster <n>``), ``adapt`` (``{minimum, maximum}``, in workers) or else ``workers`` (a scale
target), and, beyond dask-labextension's keys, ``template`` (else the ``labextension`` template made from
``labextension.factory`` when there is one, else the default template). An entry whose name a listed
cluster has already is that cluster: a running one is left alone (a server restart on the same store
re-adopts it, so it is not started twice), a stopped or failed one is restarted. An entry that cannot
be used is skipped with a log line naming it (``labextension.initial[1]``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import dask.config

from clustermgr_lab.cluster.managed import FAILED, STOPPED
from clustermgr_lab.domain.errors import ClusterManagerError
from clustermgr_lab.domain.templates import LABEXTENSION_TEMPLATE

if TYPE_CHECKING:
    from clustermgr_lab.manager.cluster_manager import ClusterManager

#: The keys of an entry this server uses (dask-labextension's, and ``template``); others are reported, not used.
KNOWN_KEYS = frozenset({"name", "workers", "adapt", "template"})


def initial_entries() -> list[tuple[str, dict[str, Any]]]:
    """``(where, entry)`` for each ``labextension.initial`` entry of Dask's config, over ``labextension.default``."""
    initial = dask.config.get("labextension.initial", None) or []
    default = dask.config.get("labextension.default", None) or {}
    if not isinstance(default, Mapping):
        default = {}
    if isinstance(initial, Mapping) or not isinstance(initial, list | tuple):
        return [("labextension.initial", initial)]  # reported as not a list of entries
    return [
        (f"labextension.initial[{i}]", {**default, **e} if isinstance(e, Mapping) else e) for i, e in enumerate(initial)
    ]


def create_request(entry: Any, index: int, templates: Collection[str]) -> tuple[dict[str, Any], int | None]:
    """The create body of one merged entry, and the worker count to scale to afterwards (None: none).

    >>> create_request({"name": "big", "workers": 3, "adapt": None}, 0, {})
    ({'name': 'big'}, 3)
    >>> create_request({"adapt": {"minimum": 0, "maximum": 5}}, 1, {"local", "labextension"})
    ({'name': 'Initial cluster 2', 'template': 'labextension', 'adapt': {'minimum': 0, 'maximum': 5, 'unit': 'workers'}}, None)

    Raises
    ------
    ValueError
        An entry that is not a mapping.
    """
    if not isinstance(entry, Mapping):
        raise ValueError(f"an entry must be a mapping such as {{name: ..., workers: 2}}, not {entry!r}")
    body: dict[str, Any] = {"name": entry.get("name") or f"Initial cluster {index + 1}"}
    template = entry.get("template") or (LABEXTENSION_TEMPLATE if LABEXTENSION_TEMPLATE in templates else None)
    if template is not None:
        body["template"] = template
    adapt = entry.get("adapt")
    if isinstance(adapt, Mapping):
        body["adapt"] = {**adapt, "unit": adapt.get("unit", "workers")}  # dask-labextension's is in workers
        return body, None
    workers = entry.get("workers")
    return body, workers


async def start_initial_clusters(manager: ClusterManager, log: logging.Logger) -> None:
    """Create (or restart) the ``labextension.initial`` clusters that are not listed and running already."""
    templates = {template["name"] for template in manager.list_templates()}
    for index, (where, entry) in enumerate(initial_entries()):
        try:
            body, workers = create_request(entry, index, templates)
            unknown = sorted(set(entry) - KNOWN_KEYS)
            if unknown:
                log.warning("clustermgr: %s: ignoring %s (not used by clustermgr-lab)", where, ", ".join(unknown))
            listed = next((c for c in manager.clusters() if c.name == body["name"]), None)
            if listed is not None and listed.lifecycle not in (STOPPED, FAILED):
                log.info("clustermgr: %s: cluster %r is listed already (%s)", where, body["name"], listed.status)
                continue
            if listed is not None:
                cluster = manager.restart(listed.id)
                log.info("clustermgr: %s: restarted cluster %s (%s)", where, cluster.id, cluster.name)
                continue
            cluster = await manager.create_durably(body)
            if workers is not None:
                manager.update(cluster.id, {"scale": {"workers": workers}})
            log.info("clustermgr: %s: started cluster %s (%s)", where, cluster.id, cluster.name)
        except (ClusterManagerError, ValueError) as exc:
            field = getattr(exc, "field", None)
            log.error("clustermgr: %s%s: not started: %s", where, f" ({field})" if field else "", exc)
