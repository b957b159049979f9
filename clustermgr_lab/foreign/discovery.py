"""Clusters started in this server's notebooks: kernels announce their schedulers in a folder, this lists them.

The kernels this server starts get two environment variables (see :meth:`ClusterDiscovery.kernel_environment`;
only kernels: :mod:`clustermgr_lab.web.kernel_environment`)
that make every scheduler started in a kernel load :mod:`clustermgr_lab.preloads.discovery`, which drops
one small JSON file per scheduler into the discovery folder and removes it when the scheduler closes.
Here, one cheap ``stat`` of that folder per interval (in a thread, off the event loop) notices the
change; only then is the folder read. Nothing writes there before this server has started a kernel,
so the folder is watched from the first kernel on: a server nobody opened a notebook in checks
nothing. Each announced scheduler is attached (backend ``external``, template ``discovered``).

How it ended is known, not guessed: the preload removes the file when its scheduler closes, before
the scheduler drops its connections (distributed tears preloads down first); a kernel that dies
leaves its file behind (this server removes it, seeing the kernel gone). So a scheduler whose file
its kernel removed was closed normally: the cluster ends ``stopped``, saying so; one whose
connection was lost with its file still there (or removed by this server) ends ``failed``, with the
reason. Either stays listed until removed, or until its notebook starts another cluster.
"""

from __future__ import annotations

import ast
import asyncio
import os
import shutil
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import dask.config
import psutil
from traitlets import Bool, Float
from traitlets.config import LoggingConfigurable

from clustermgr_lab.backends import parse_scheduler_address
from clustermgr_lab.cluster.managed import DISCOVERED, FAILED, PENDING, RUNNING, STOPPED
from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.errors import ClusterManagerError, NotFound
from clustermgr_lab.foreign.announcements import (
    MAX_ANNOUNCEMENTS,
    Announcement,
    BadAnnouncement,
    check_folder,
    local_addresses,
    parse_announcement,
    read_file,
)
from clustermgr_lab.manager.cluster_manager import ClusterManager
from clustermgr_lab.preloads import discovery as discovery_preload

PRELOAD_ENV = "DASK_DISTRIBUTED__SCHEDULER__PRELOAD"
MAX_EXAMINED = 4 * MAX_ANNOUNCEMENTS  # files looked at per change of the folder


def _existing_preloads(value: str | None) -> list[str]:
    """The scheduler preloads a kernel would have without this server: the environment's, else the user's Dask config files.

    The environment variable this server sets takes precedence over the config files in the
    kernel, so the preloads named there are carried over into it: added to, never replaced.
    """
    if not value:
        paths = dask.config._get_paths() if hasattr(dask.config, "_get_paths") else dask.config.paths
        configured = dask.config.get("distributed.scheduler.preload", None, config=dask.config.collect(paths, env={}))
        if not configured:
            return []
        return [configured] if isinstance(configured, str) else [str(p) for p in configured]
    try:  # Dask reads its environment variables as Python literals
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value
    return [parsed] if isinstance(parsed, str) else [str(p) for p in parsed]


def closed_normally(origin: str) -> str:
    """What a discovered cluster closed where it was started says (``origin``: e.g. ``its notebook x.ipynb``)."""
    return f"closed in {origin}: its scheduler shut down normally"


def remove_stale_folders(parent: Path, log) -> None:
    """Remove the ``server-<pid>`` discovery folders of servers that are gone (killed servers leave theirs).

    A folder is stale when its PID is not running, or runs a process started after the folder was made (a reused PID).
    """
    for folder in parent.glob("server-*"):
        pid = folder.name.removeprefix("server-")
        if not pid.isdigit() or int(pid) == os.getpid() or folder.is_symlink() or not folder.is_dir():
            continue
        try:
            alive = psutil.Process(int(pid)).create_time() <= folder.stat().st_mtime + 1
        except (psutil.Error, OSError, OverflowError):
            alive = False
        if not alive:
            shutil.rmtree(folder, ignore_errors=True)
            log.info("removed the discovery folder %s of a server that is gone", folder)


class ClusterDiscovery(LoggingConfigurable):
    """Lists the Dask schedulers started in this server's kernels (``LocalCluster()`` in a notebook)."""

    enabled = Bool(
        True,
        config=True,
        help="Make schedulers started in this server's kernels (e.g. a notebook's LocalCluster) "
        "announce themselves, and list them as external clusters. Kernels started before this "
        "server are not affected.",
    )
    interval = Float(
        0.25,
        config=True,
        help="Seconds between two checks of the discovery folder (one stat call each; the folder is "
        "only read when it changed), from the first kernel this server starts on. Announced clusters "
        "appear within about this time plus the time to reach their scheduler.",
    )

    def __init__(self, manager: ClusterManager, **kwargs):
        super().__init__(**kwargs)
        self.manager = manager
        # One folder per server: kernels of another server on the same workdir announce elsewhere.
        self.folder = Path(manager.workdir) / "discovery" / f"server-{os.getpid()}"
        self._known: dict[str, str | None] = {}  # announcement file -> cluster id (None: not listed)
        self._origins: dict[
            str, tuple[str, str]
        ] = {}  # cluster id -> (its file, the notebook or kernel that started it)
        self._dead: set[str] = set()  # announcement files this server removed: their kernel died, nothing closed
        self._mtime: int | None = None
        self._ready = False  # the folder is made and safe: kernels may be told about it
        self._task: asyncio.Task | None = None  # the watch, from the first kernel on
        self._tidy: asyncio.Task | None = None  # removing folders of servers that are gone, once
        self._reported: set[str] = set()  # announcement files already logged as unacceptable
        self._reported_excess = False

    def kernel_environment(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment variables that make a kernel's schedulers announce themselves here.

        ``env`` is the environment the kernel would start with (default: the server's): the scheduler preloads
        named there (or else in the Dask config files) are kept, this one added.
        """
        env = os.environ if env is None else env
        preloads = _existing_preloads(env.get(PRELOAD_ENV))
        preload = str(Path(discovery_preload.__file__).resolve())
        if preload not in preloads:
            preloads.append(preload)
        return {PRELOAD_ENV: repr(preloads), discovery_preload.DISCOVERY_DIR_ENV: str(self.folder)}

    def kernel_variables(self, env: Mapping[str, str]) -> dict[str, str]:
        """What one kernel about to start with ``env`` gets (:mod:`clustermgr_lab.web.kernel_environment`):
        nothing while discovery is off. The first kernel starts the watch of the folder."""
        if not self._ready:
            return {}
        if self._task is None:
            self._task = asyncio.ensure_future(self._watch())
        return self.kernel_environment(env)

    def start(self) -> None:
        """Make the folder; kernels started from now on get :meth:`kernel_variables` (and the first starts the watch)."""
        if not self.enabled or self._ready:
            return
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            check_folder(self.folder)
        except PermissionError as exc:
            self.log.error("clustermgr: cluster discovery is off: %s", exc)
            return
        self._ready = True
        self._tidy = asyncio.ensure_future(self._remove_stale_folders())

    @property
    def watching(self) -> bool:
        """Whether the folder is being watched (from the first kernel this server started on)."""
        return self._task is not None

    async def stop(self) -> None:
        await cancel_and_wait(self._task, self._tidy)
        self._task = self._tidy = None
        self._ready = False
        await asyncio.to_thread(shutil.rmtree, self.folder, True)

    async def _remove_stale_folders(self) -> None:
        try:
            await asyncio.to_thread(remove_stale_folders, self.folder.parent, self.log)
        except OSError as exc:
            self.log.warning("clustermgr: could not remove stale discovery folders: %s", exc)

    async def _watch(self) -> None:
        while True:
            try:
                announcements = await asyncio.to_thread(self._read_if_changed)
                if announcements is not None:
                    self._apply(announcements)
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad turn must not end discovery
                self.log.exception("clustermgr: cluster discovery failed; trying again")
            await asyncio.sleep(self.interval)

    def _read_if_changed(self) -> dict[str, Announcement] | None:
        """The acceptable announcements in the folder, or None when it did not change since the last look.

        Every file is untrusted input (see :mod:`clustermgr_lab.foreign.announcements`): one that fails a check
        is skipped with one log line; one left by a kernel that died is removed.
        """
        try:
            mtime = self.folder.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        if mtime == self._mtime:
            return None
        self._mtime = mtime
        names = sorted(entry.name for entry in os.scandir(self.folder) if entry.name.endswith(".json"))
        if len(names) > MAX_EXAMINED and not self._reported_excess:
            self.log.warning(
                "clustermgr: %d announcement files in %s; reading the first %d only",
                len(names),
                self.folder,
                MAX_EXAMINED,
            )
        self._reported_excess = len(names) > MAX_EXAMINED
        allowed = local_addresses()
        announcements: dict[str, Announcement] = {}
        for name in names[:MAX_EXAMINED]:
            if len(announcements) >= MAX_ANNOUNCEMENTS:
                break
            path = self.folder / name
            try:
                announcements[name] = parse_announcement(read_file(path, os.getuid()), os.getpid(), allowed)
            except BadAnnouncement as exc:
                if "is gone" in str(exc):
                    self._dead.add(name)
                    path.unlink(missing_ok=True)  # left by a kernel that died without closing its cluster
                elif name not in self._reported:
                    self.log.warning("clustermgr: ignoring announcement file %r: %s", name, exc)
                self._reported.add(name)
        self._reported &= set(names)
        return announcements

    def _apply(self, announcements: dict[str, Announcement]) -> None:
        for name in set(self._known) - set(announcements):
            self._gone(name, self._known.pop(name))
        for name, announcement in announcements.items():
            if name not in self._known:
                self._known[name] = self._attach(name, announcement)
        self._origins = {i: o for i, o in self._origins.items() if self._listed(i)}
        self._dead &= {file for file, _ in self._origins.values()}  # asked about until their cluster leaves

    def _listed(self, cluster_id: str) -> bool:
        try:
            self.manager.get(cluster_id)
        except NotFound:
            return False
        return True

    def _attach(self, file: str, announcement: Announcement) -> str | None:
        notebook = announcement.notebook
        label = Path(notebook).name if notebook else f"kernel {announcement.pid}"
        origin = f"its notebook {label}" if notebook else label
        self._remove_ended(origin)
        try:
            address = parse_scheduler_address(announcement.address)
            name = self.manager.unique_name(f"{label} {address.removeprefix('tcp://')}")
            closed_by_owner = partial(self._closed_by_owner, file, origin)
            cluster = self.manager.attach(address, name, origin=DISCOVERED, closed_by_owner=closed_by_owner)
        except ClusterManagerError as exc:  # e.g. attached by hand already
            self.log.info("clustermgr: not listing an announced scheduler: %s", exc.message)
            return None
        self._origins[cluster.id] = (file, origin)
        return cluster.id

    def _remove_ended(self, origin: str) -> None:
        """A notebook that starts a cluster again takes the cluster it ended (closed or lost) off the list."""
        for cluster_id, (_, started_by) in list(self._origins.items()):
            try:
                if started_by == origin and self.manager.get(cluster_id).lifecycle in (STOPPED, FAILED):
                    self.manager.delete(cluster_id)
            except NotFound:
                pass

    async def _closed_by_owner(self, file: str, origin: str) -> str | None:
        """How the scheduler announced in ``file`` was closed, if its kernel removed the file (a normal close)."""
        if file in self._dead or await asyncio.to_thread((self.folder / file).exists):
            return None
        return closed_normally(origin)

    def _gone(self, file: str, cluster_id: str | None) -> None:
        """An announcement file went: closed normally by its kernel, or removed here because its kernel died."""
        if cluster_id is None or file in self._dead:
            return  # a lost scheduler: its cluster's link reports it, with the reason
        try:
            cluster = self.manager.get(cluster_id)
        except NotFound:
            return  # detached by hand already
        if cluster.lifecycle == PENDING:  # never reached: nothing to say about it
            self.manager.delete(cluster_id)
        elif cluster.lifecycle == RUNNING:
            _, origin = self._origins[cluster_id]
            asyncio.ensure_future(cluster.ended_by_itself(closed_normally(origin)))
