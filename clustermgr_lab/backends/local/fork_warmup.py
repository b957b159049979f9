"""What the fork server prepares once so that every fork finds it ready: parsed configuration, routes, reports.

Each forked scheduler or worker would otherwise redo this work in its own start-up, on the same cores
as its siblings: parse dask's YAML files, import the HTTP routes' modules, compile the dashboard's
routes, gather the versions report. :func:`warm` does the imports and warm-ups once, after the
preload; :class:`YamlConfig` re-reads the files only after one has changed. Each step that fails
leaves a line in the launcher's log, and the forks then do that step themselves.

Only the fork server (:mod:`.forkserver`) imports this module.
"""

from __future__ import annotations

import importlib
import os


class YamlConfig:
    """dask's YAML configuration files, parsed by the launcher once and again only after one has changed.

    Every forked child refreshes dask's configuration for the requesting server's ``DASK_*``
    variables; parsing the files again in each (e.g. dask-jobqueue's ``jobqueue.yaml``, mostly
    comments) took 40-70 ms of each scheduler's and nanny's start-up under load.
    """

    def __init__(self) -> None:
        self._signature: tuple | None = None
        self._merged: dict | None = None

    @staticmethod
    def signature(paths: list[str]) -> tuple:
        """What ``dask.config.collect_yaml`` would read from ``paths``: each file's path, size and change time."""
        found = []
        for path in paths:
            try:
                if os.path.isdir(path):
                    files = sorted(
                        os.path.join(path, p)
                        for p in os.listdir(path)
                        if os.path.splitext(p)[1].lower() in (".json", ".yaml", ".yml")
                    )
                else:
                    files = [path] if os.path.exists(path) else []
                for file in files:
                    info = os.stat(file)
                    found.append((file, info.st_size, info.st_mtime_ns, info.st_ino))
            except OSError as exc:
                found.append((path, repr(exc)))
        return tuple(found)

    def current(self) -> dict | None:
        """The files' configuration merged (later files win, deprecated keys renamed); None if they cannot be read."""
        import dask.config

        signature = self.signature(list(dask.config.paths))
        if signature != self._signature:
            try:
                merged = dask.config.merge(*dask.config.collect_yaml(dask.config.paths))
                dask.config.rename(config=merged)
            except Exception as exc:  # the child reads them itself and reports the error in its log
                print(f"launcher {os.getpid()}: cannot read dask's configuration files: {exc!r}", flush=True)
                merged = None
            self._signature, self._merged = signature, merged
        return self._merged


def import_http_routes() -> list[str]:
    """Import the modules of the HTTP routes every scheduler and worker serves (dask config); returns those imported.

    Each forked process would import them itself when its HTTP server starts: the scheduler's
    ``distributed.http.proxy`` alone brings in jupyter-server-proxy and aiohttp: 0.45-0.85 s of every
    scheduler's start-up at a load average of 7, most of it. One that cannot be imported is skipped
    here: the process that needs it reports the error in its own log.
    """
    import dask

    imported = []
    for key in ("distributed.scheduler.http.routes", "distributed.worker.http.routes"):
        for module in dask.config.get(key, default=[]):
            if module in imported:
                continue
            try:
                importlib.import_module(module)
            except Exception as exc:
                print(f"launcher {os.getpid()}: cannot preload {module}: {exc!r}", flush=True)
                continue
            imported.append(module)
    return imported


def warm_dashboard_routes() -> bool:
    """Build the scheduler dashboard's Bokeh application once and drop it, so forked schedulers find its routes compiled.

    Tornado compiles one regular expression per route (about 260 for the dashboard) when a scheduler
    builds its dashboard; ``re`` caches compiled patterns per process, so compiling them here once
    leaves every fork a warm cache. False (after a line in the launcher's log) when it cannot.
    """
    import types

    try:
        from distributed.dashboard.core import BokehApplication
        from distributed.dashboard.scheduler import applications

        server = types.SimpleNamespace(http_server=types.SimpleNamespace(port=0))
        BokehApplication(applications, server, prefix=None, template_variables={})
    except Exception as exc:
        print(f"launcher {os.getpid()}: cannot warm the dashboard's routes: {exc!r}", flush=True)
        return False
    return True


def warm_version_report() -> bool:
    """Gather what a worker and a scheduler report of their versions once, so that every fork finds it cached.

    Each worker sends ``distributed.versions.get_versions()`` when it registers (and a scheduler gathers its own
    when the first one joins): package versions read from their metadata and ``platform.uname()``, whose
    processor field runs ``uname -p``. Done once here, it is about 16 ms of CPU less in every fork's start (a third
    of a small worker's); the versions reported are those of the code the forks run (imported here). False (after a
    line in the launcher's log) when it cannot.
    """
    try:
        from distributed.versions import get_versions

        get_versions()
    except Exception as exc:
        print(f"launcher {os.getpid()}: cannot gather the versions report: {exc!r}", flush=True)
        return False
    return True


def warm(preload: list[str], forkable: tuple[str, ...]) -> list[str]:
    """Import ``preload``, then warm what forks of the dask CLIs in ``forkable`` use; returns what was warmed."""
    for module in preload:
        importlib.import_module(module)
    if not set(forkable) & set(preload):  # a launcher that preloads no dask CLI: nothing more to warm
        return []
    warmed = [f"the HTTP routes {', '.join(import_http_routes())}"]
    if "distributed.dashboard.scheduler" in preload and warm_dashboard_routes():
        warmed.append("the dashboard's routes")
    if warm_version_report():
        warmed.append("the versions report")
    return warmed
