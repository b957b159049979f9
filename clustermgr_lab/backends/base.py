"""The backend contract: what a cluster needs from a backend, and what a backend receives from the server."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from traitlets.config import LoggingConfigurable
from traitlets.traitlets import MetaHasTraits

from clustermgr_lab.common.proctitle import CLUSTER_NAME_ENV
from clustermgr_lab.domain.options import BackendOption, UserOption
from clustermgr_lab.domain.spec import WorkerGroup

if TYPE_CHECKING:
    from clustermgr_lab.common.security import ClusterCredentials

WorkerExited = Callable[[str, "int | None"], None]
#: The name under which a backend tracks and records its scheduler process (next to the worker names).
SCHEDULER_PROCESS = "scheduler"


@dataclass(frozen=True)
class Capabilities:
    """What a cluster of a backend can do; in the API as ``capabilities`` (templates and clusters).

    Attributes
    ----------
    can_scale : bool
        Scaling, adaptive mode and spec edits are possible (else refused with a 409).
    can_stop : bool
        Deleting the cluster stops its processes (else it only detaches from them).
    multiple_groups : bool
        Its Worker Spec may have more than one group.
    readoptable : bool
        It survives a server restart (stored, then re-adopted).
    runs_processes_here : bool
        Its processes run on the server's host (so this machine's size limits its workers).
    exact_retire : bool
        When shrinking, exactly the workers the scheduler picks are stopped (else the backend's own
        machinery picks which ones go; the picked ones are still retired first, so their data moves).
    editable_spec : bool
        Its Worker Spec may be edited (groups, threads, memory); else only the count of its one group changes.
    enforces_tls : bool
        The server's TLS credentials are applied to its scheduler and workers (else the backend's own settings decide).
    reasons : mapping
        Why a capability is off, by its name: shown with the greyed-out action.
    """

    can_scale: bool = True
    can_stop: bool = True
    multiple_groups: bool = True
    readoptable: bool = True
    runs_processes_here: bool = True
    exact_retire: bool = True
    editable_spec: bool = True
    enforces_tls: bool = True
    reasons: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # Every cluster in every list carries it: asdict (a deep copy) took a third of listing 100 clusters.
        flags = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "reasons"}
        return {**flags, "reasons": dict(self.reasons)}


class ProcessLauncher(Protocol):
    """Forks processes on this machine for backends: the server's warm launcher (``backends/local/launcher.py``)."""

    enabled: bool

    async def spawn(self, command: list[str], env: dict[str, str], log_path: Path, *, tied: bool = False) -> Any:
        """A started process (waitable like ``asyncio.subprocess.Process``), or None: start a plain one instead."""

    async def untie(self, pid: int) -> bool:
        """Let a process started ``tied`` outlive this server's connection."""

    def watch(self, pid: int, create_time: float | None = None, *, poll: bool = True) -> Any:
        """A waitable handle on a process this launcher started (e.g. one re-adopted after a restart)."""


class HelperProcess(Protocol):
    """A process of the server's where distributed is imported already (its scheduler links' process), for backend
    work that needs distributed or asyncssh: the server never imports them for it.

    ``ask`` sends an operation its side knows (e.g. the SSH backend's ``ssh_*``, served by
    :func:`clustermgr_lab.backends.ssh.sessions.answer`); the process starts on first use and is let go once
    nothing holds it. A backend that holds state there subscribes to a topic of its own: it hears that
    state's news as ``on_event(event, args)``, and ``("lost", [])`` when the process exited (with all it held).
    """

    async def ask(self, message: dict[str, Any], timeout: float) -> Any:
        """The answer to ``message`` (``op`` and its fields). Raises ``OSError`` when the process exited or did not
        answer within ``timeout`` (its start included), ``ValueError`` or ``RuntimeError`` as the operation did."""

    def subscribe(self, topic: str, on_event: Callable[[str, list[Any]], None]) -> None:
        """Hear ``topic``'s news; the process is not let go while a topic is subscribed."""

    def unsubscribe(self, topic: str) -> None:
        """Stop hearing ``topic``'s news."""


@dataclass(frozen=True)
class BackendContext:
    """What the server hands a backend at construction: its folder, whom to tell, what to fork from.

    Attributes
    ----------
    workdir : Path
        A folder of this cluster's own, for logs and scheduler files.
    on_worker_exit : callable, optional
        Called with ``(name, returncode)`` when a worker ends on its own.
    on_change : callable, optional
        Called after a process or job was started or stopped (so that the server stores the new
        :meth:`Backend.process_records` before anything else can happen to it), and when
        :meth:`Backend.waiting` has changed.
    launcher : ProcessLauncher, optional
        Forks local processes when it can; None starts plain processes.
    idle_timeout : float, optional
        Seconds without tasks and clients after which the scheduler shuts itself down.
    security : ClusterCredentials, optional
        The cluster's TLS files (see :mod:`clustermgr_lab.common.security`): scheduler and workers must be
        started with them (``security.cli_arguments()`` on their command lines,
        ``security.environment()`` in their environment; ``security.security()`` is the
        ``distributed.Security``). None: TLS is off for this cluster (plain ``tcp://``).
    listed_as : callable, optional
        Given a scheduler id, the name of another cluster this server lists with that scheduler, or
        None (a backend that attaches refuses a scheduler listed already).
    closed_by_owner : callable, optional
        Asked once the scheduler is gone: how whoever started it closed it normally, in words, or None
        when it did not (it was lost). Given by discovery, which a notebook's scheduler tells.
    name : str, optional
        The cluster's name when it was made: its processes carry it in their titles
        (:meth:`Backend.title_environment`).
    helper : HelperProcess, optional
        The server's scheduler links' process, where distributed is imported already, for a backend's work
        that needs it (batch job scripts written by dask-jobqueue, the SSH backend's connections, a scheduler
        job asked to close). None: the backend does that work in its own process.
    """

    workdir: Path
    on_worker_exit: WorkerExited | None = None
    on_change: Callable[[], None] | None = None
    launcher: ProcessLauncher | None = None
    idle_timeout: float | None = None
    security: ClusterCredentials | None = None
    listed_as: Callable[[str], str | None] | None = None
    closed_by_owner: Callable[[], Awaitable[str | None]] | None = None
    name: str | None = None
    helper: HelperProcess | None = None


class _BackendMeta(abc.ABCMeta, MetaHasTraits):
    """Abstract methods and traitlets together."""


@dataclass(frozen=True)
class TemplateProbe:
    """What a backend learnt, asking the resource a template names, of whether it can be used now and how.

    Attributes
    ----------
    reason : str or None
        Why the template cannot be used now (e.g. its gateway does not answer); None: it can.
    user_options : tuple of UserOption, optional
        The options the resource offers users (e.g. a gateway's ``/api/v1/options``); None: the template's own.
    """

    reason: str | None = None
    user_options: tuple[UserOption, ...] | None = None


@dataclass(frozen=True)
class Waiting:
    """Why a requested worker is not running yet, in the backend's words (e.g. SLURM's ``Resources``)."""

    reason: str
    job_id: str | None = None


@dataclass(frozen=True)
class SchedulerEndpoint:
    """Where a started scheduler listens: its comm address, its dashboard's host:port, and its id.

    ``scheduler_id`` (``Scheduler.id``) tells this scheduler from another one that later listens
    on the same port: a restarted server re-adopts a cluster only when the id still matches.
    """

    address: str
    dashboard_address: str | None
    scheduler_id: str | None = None


class Backend(LoggingConfigurable, metaclass=_BackendMeta):
    """Starts and stops the processes of one cluster.

    A backend knows *how* to run workers on some resource (local processes, SLURM jobs...).
    It is never asked to decide *when*: the cluster's scale routine calls :meth:`scale_up` with
    the names of the workers it wants and :meth:`scale_down` with the names it has retired.

    A backend is a traitlets configurable: its site settings are traits with ``config=True``
    (``c.SSHBackend.hosts = [...]``), given by the server as ``parent``.

    Parameters
    ----------
    cluster_id : str
        Used to label processes or jobs.
    context : BackendContext or Path
        Its work folder, callbacks and launcher (a bare path: a context with that folder only).
    options : mapping, optional
        The template's options, already checked against :attr:`template_options`; each one
        sets the attribute of the same name.
    on_worker_exit, on_change : callable, optional
        Shorthands that replace the context's callbacks.
    **kwargs
        For :class:`~traitlets.config.LoggingConfigurable` (``parent``, ``config``, ``log``).

    Examples
    --------
    A backend for another resource manager is one small class::

        class MyBackend(Backend):
            name = "mine"

            async def start_scheduler(self):
                ...  # start it, return SchedulerEndpoint(address, dashboard_address)

            async def scale_up(self, group, names):
                ...  # start one worker per name: `dask worker ADDRESS --name NAME ...`

            async def scale_down(self, names):
                ...  # stop those workers

            async def close(self):
                ...  # stop whatever is left, scheduler included
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: True when :meth:`scale_up` may be called while :meth:`start_scheduler` is still waiting
    #: for the scheduler, so that worker and scheduler start-ups overlap.
    workers_before_scheduler: ClassVar[bool] = False
    #: What its clusters can do (see :class:`Capabilities`).
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: The options a template may give this backend (``"options": {...}``), checked at server start.
    template_options: ClassVar[Mapping[str, BackendOption]] = {}
    #: True for a backend that attaches to a scheduler started elsewhere (made with ``address=``): a restarted
    #: server attaches it again (:meth:`start_scheduler` once more) instead of re-adopting processes.
    attaches: ClassVar[bool] = False
    #: The class of the cluster's line to this backend's scheduler; None: the cluster's own
    #: :class:`~clustermgr_lab.cluster.scheduler_link.SchedulerLink` (it subscribes to the worker stream). It is
    #: made like that one, given the cluster's TLS files as ``security`` (:class:`ClusterCredentials`).
    scheduler_link: ClassVar[type | None] = None
    #: When set, the cluster's link is its :attr:`scheduler_link` run in the server's helper process (the scheduler
    #: links' process, which serves this kind) rather than in the server: e.g. ``"gateway"``, whose link imports
    #: distributed. None: :attr:`scheduler_link` runs in the server (or the cluster's own link in the helper).
    hosted_link_kind: ClassVar[str | None] = None
    #: Called with a worker's name (the resource's) when a link of :attr:`hosted_link_kind` reports it gone.
    worker_gone: Callable[[str], None] | None = None
    #: Whether the scheduler's dashboard is served over HTTPS with the cluster's TLS credentials (when it has them).
    dashboard_over_tls: ClassVar[bool] = True
    #: The cluster's dashboard at an address of its own that a browser opens directly (e.g. a gateway's dashboard
    #: route), set once the scheduler runs; None: the scheduler's dashboard, through this server's dashboard proxy.
    dashboard_link: str | None = None
    #: The template option that receives the user's option values as one mapping, for a backend whose user
    #: options are learnt from its resource (:meth:`probe`); None: each user option sets the backend option of its name.
    user_options_option: ClassVar[str | None] = None
    #: True for a backend made with ``standby=``: a TLS scheduler on 127.0.0.1 started ahead of time (the
    #: server's standby pool), which it takes over instead of starting one.
    takes_standby: ClassVar[bool] = False
    #: Whether its scheduler or workers may be forked by the server's warm launcher (a scheduler next to the server,
    #: local workers): a first use starts the launcher, and its standby schedulers, only for such a backend.
    uses_launcher: ClassVar[bool] = True

    def __init__(
        self,
        cluster_id: str,
        context: BackendContext | Path,
        *,
        options: Mapping[str, Any] | None = None,
        on_worker_exit: WorkerExited | None = None,
        on_change: Callable[[], None] | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if not isinstance(context, BackendContext):
            context = BackendContext(Path(context))
        callbacks = {"on_worker_exit": on_worker_exit, "on_change": on_change}
        self.context = replace(context, **{k: v for k, v in callbacks.items() if v is not None})
        self.cluster_id = cluster_id
        #: The scheduler's comm address once it runs (or is adopted); None before and after.
        self.address: str | None = None
        self.idle_timeout: float | None = self.context.idle_timeout
        for key, value in (options or {}).items():
            setattr(self, key, value)

    @property
    def workdir(self) -> Path:
        return Path(self.context.workdir)

    def title_environment(self) -> dict[str, str]:
        """The variable that puts the cluster's name into its scheduler's and workers' process titles
        (:mod:`clustermgr_lab.common.proctitle`; the preloads read it); empty when the cluster has no name."""
        return {CLUSTER_NAME_ENV: self.context.name} if self.context.name else {}

    @property
    def launcher(self) -> ProcessLauncher | None:
        return self.context.launcher

    @property
    def security(self) -> ClusterCredentials | None:
        """The cluster's TLS credentials (None: plain TCP)."""
        return self.context.security

    @property
    def can_scale(self) -> bool:
        return self.capabilities.can_scale

    def _notify_change(self) -> None:
        if self.context.on_change is not None:
            self.context.on_change()

    def _report_exit(self, name: str, returncode: int | None) -> None:
        """Tell the cluster that worker ``name`` ended on its own."""
        if self.context.on_worker_exit is not None:
            self.context.on_worker_exit(name, returncode)

    def set_idle_timeout(self, seconds: float | None) -> None:
        """The idle timeout of the next scheduler this backend starts (a running one is told by the cluster)."""
        self.idle_timeout = seconds

    def stopped_for_idleness(self) -> bool:
        """True when the scheduler is gone because it shut itself down after its idle timeout."""
        return False

    @property
    def idle_timeout_to_push(self) -> float | None:
        """An idle timeout the scheduler must be told once linked (e.g. one started ahead without it); None: none."""
        return None

    async def closed_by_owner(self) -> str | None:
        """Once the scheduler is gone: how whoever started it closed it normally, in words; None: it was lost."""
        return await self.context.closed_by_owner() if self.context.closed_by_owner is not None else None

    @classmethod
    def submit_command(cls) -> str | None:
        """The command outside this server that the backend needs to start workers (e.g. ``sbatch``); None: none.

        Called on the server's main thread (importing dask-jobqueue touches signal handlers); whether
        it is installed is checked in an executor (:mod:`clustermgr_lab.manager.availability`).
        """
        return None

    @classmethod
    async def probe(
        cls, options: Mapping[str, Any], timeout: float, helper: HelperProcess | None = None
    ) -> TemplateProbe | None:
        """Ask the resource a template's ``options`` name whether it can be used now, and what users may set.

        Called for each template of this backend when templates are listed (at most every few seconds), on
        the event loop: it must not block, and must return within ``timeout`` seconds. None: nothing to ask.
        ``helper``, here and in the class methods below: the server's :class:`HelperProcess` (None: none).
        """
        return None

    @classmethod
    async def create_ahead(
        cls, options: Mapping[str, Any], timeout: float, helper: HelperProcess | None = None
    ) -> str | None:
        """Have the resource take a new cluster of these backend ``options`` while its request waits.

        So that a value the resource refuses is the request's 400 naming the field (an ``InvalidRequest``),
        with the resource's own message. Returns the address the backend is then made with (``address=``,
        as for a found cluster); None (the default): nothing is asked ahead, :meth:`start_scheduler` starts it.
        """
        return None

    @classmethod
    async def withdraw_ahead(
        cls, options: Mapping[str, Any], address: str, timeout: float, helper: HelperProcess | None = None
    ) -> None:
        """Stop a cluster :meth:`create_ahead` made that the server then did not list (refused for another reason)."""

    @classmethod
    def worker_shape(cls, group: WorkerGroup, values: Mapping[str, Any]) -> WorkerGroup:
        """The size of a worker of ``group`` given a new cluster's user option ``values`` (the group as it is, by default).

        For a backend whose workers' size is a user option (a gateway's ``worker_cores`` and ``worker_memory``):
        scaling by cores or memory then resolves with the size the workers will have.
        """
        return group

    @classmethod
    async def find_clusters(
        cls, options: Mapping[str, Any], timeout: float, helper: HelperProcess | None = None
    ) -> list[str] | None:
        """The scheduler addresses of the clusters this user runs on the resource a template's ``options`` name.

        Clusters made anywhere (a notebook's too): the server lists those it does not list yet, with a
        backend of this class made with ``address=``. None: this backend finds none (the default).
        """
        return None

    @abc.abstractmethod
    async def start_scheduler(self) -> SchedulerEndpoint:
        """Start the scheduler (loading ``clustermgr_lab.preloads.scheduler``) and return its endpoint."""

    @abc.abstractmethod
    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        """Start one worker of ``group`` per name in ``names``, each with ``--name NAME``."""

    @abc.abstractmethod
    async def scale_down(self, names: list[str]) -> None:
        """Stop the workers called ``names`` (already retired by the scheduler, or never connected)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop every process this backend started, scheduler included."""

    def claim_worker(self, info: Mapping[str, Any]) -> str:
        """The name of the requested worker that a newly connected worker is (``info``: the scheduler's).

        Workers started here carry the requested name (``--name NAME``); a backend whose workers are
        named by someone else maps them to requested names here.
        """
        return str(info.get("name"))

    def waiting(self) -> dict[str, Waiting]:
        """Why requested workers are not running yet, by worker name (those the backend knows about)."""
        return {}

    def started(self) -> set[str]:
        """Names of the workers this backend has started (processes or jobs) and not yet stopped."""
        return set(self.pids())

    def pids(self) -> dict[str, int]:
        """Process ids of what runs on this machine, by worker name (``"scheduler"`` too)."""
        return {}

    def exit_reason(self, name: str) -> str | None:
        """Why worker ``name`` ended, in a line (e.g. the error it printed last), when the backend can tell."""
        return None

    def process_records(self) -> dict[str, dict[str, Any]]:
        """What identifies each running process or job, by worker name (``"scheduler"`` too).

        JSON-ready (e.g. ``{"pid": 123, "create_time": 1.7e9}`` or ``{"job_id": "42", ...}``);
        stored, and handed back to :meth:`adopt` by the next server.
        """
        return {}

    async def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> set[str]:
        """Take over the processes or jobs of ``records`` that still run (after a server restart).

        Returns the names of the workers that still run; from then on they are tracked, and
        :meth:`close` stops them, as if this backend had started them.
        """
        return set()

    async def detach(self) -> None:
        """Stop watching the processes, and leave them running (for the next server to adopt)."""

    #: Seconds to wait, after the scheduler lost a worker, for the backend to report the worker's process or
    #: job ended (its exit code or job state explains more than the worker's log) before reading the log.
    departure_grace = 1.5

    def worker_log(self, name: str) -> Path | None:
        """The file worker ``name`` writes its output to (where its nanny says why it restarted it), if any."""
        return None

    def log_files(self) -> dict[str, Path]:
        """Every log of this cluster by name (``"scheduler"``, then each worker's), from its work folder.

        Read from the folder, not from what runs: the logs of workers that went away, and of a stopped
        cluster, stay listed until the cluster is removed (its folder with it). Blocking (directory scan).
        """
        try:
            entries = sorted(self.workdir.iterdir())
        except OSError:
            return {}
        # a symbolic link is never a log (it could name any file this user can read)
        return {
            p.stem: p
            for p in entries
            if p.suffix == ".log" and not p.name.startswith(".") and p.is_file() and not p.is_symlink()
        }

    def log_owner(self, log_name: str) -> str | None:
        """The worker whose log ``log_name`` is (None for the scheduler's)."""
        return None if log_name == SCHEDULER_PROCESS else log_name

    def departure_evidence(self, name: str) -> tuple[str, str] | None:
        """What the backend learnt of why worker ``name`` ended, as ``(kind, detail)`` (e.g. a batch job's final state)."""
        return None

    def log_tail(self, name: str, lines: int = 15) -> str:
        """The last lines of the log of process ``name`` (``"scheduler"`` or a worker), if there is one."""
        return ""
