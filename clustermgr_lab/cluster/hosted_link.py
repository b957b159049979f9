"""The server's side of the scheduler links: :class:`LinkHost`, the process they run in, and :class:`HostedSchedulerLink`.

The server never imports distributed for its clusters' links: each :class:`HostedSchedulerLink`
is a :class:`~.scheduler_link.SchedulerLink` running in :mod:`.link_host`'s process, which the server
starts on first use and lets go ``release_after`` seconds after the last link closed, once no cluster is
left that may open one. A host that dies (killed, out of memory) is started again and every open link
subscribes anew: the workers that left meanwhile are reported gone, the scheduler shown not answering
until then, and a running cluster never fails for it (one whose link was starting at that moment does).

A cluster's link, as :class:`~.managed.ManagedCluster` makes it (``manager.link_host`` is the server's)::

    link = HostedSchedulerLink(manager.link_host, "tls://10.0.0.5:8786", added, removed, lost, security=credentials)
    await link.start()
    await link.retire_workers(["tls://10.0.0.6:4001"])
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psutil
from traitlets import Float
from traitlets.config import LoggingConfigurable

from clustermgr_lab.cluster.link_host import TRAITS, packer, unpacker
from clustermgr_lab.cluster.scheduler_link import SchedulerLink, WorkerAdded, WorkerRemoved
from clustermgr_lab.domain.errors import Conflict, SchedulerTimeout

if TYPE_CHECKING:
    from clustermgr_lab.common.security import ClusterCredentials

log = logging.getLogger(__name__)

#: What the server raises for each error kind of :data:`~.link_host.ERROR_KINDS`.
ERRORS: dict[str, type[Exception]] = {
    "scheduler-timeout": SchedulerTimeout,
    "timeout": asyncio.TimeoutError,
    "os": OSError,
    "value": ValueError,
    "conflict": Conflict,
    "other": RuntimeError,
}
#: Seconds the first look at the machine's memory may wait for the process to start and import distributed.
MEMORY_LIMIT_TIMEOUT = 30.0
#: Seconds making a cluster's TLS files may take (the process's start included).
CREDENTIALS_TIMEOUT = 30.0
#: Seconds a request may wait beyond its own timeout for the host's answer (a host that hangs is a peer too).
ANSWER_MARGIN = 10.0


class HostGone(RuntimeError):
    """The link host exited while a request waited for its answer: nothing is known of the scheduler (not "gone")."""


class LinkHost(LoggingConfigurable):
    """The process of :mod:`.link_host`: started on the first request, let go once it has had no link (nor a
    backend's subscribed topic, e.g. SSH connections it holds) for a while.

    Every request waits for its answer at most its own timeout plus :data:`ANSWER_MARGIN`; when the
    process exits, every waiting request raises :class:`HostGone` and each open link subscribes again
    in a new process.
    """

    release_after = Float(
        120.0,
        config=True,
        help="Seconds after the last scheduler link closed before the server lets go of the process that "
        "runs them (the next cluster starts it again, about 0.5 s of CPU while its scheduler starts).",
    )

    def __init__(self, busy: Callable[[], bool] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self._busy = busy or (lambda: False)  # True while a cluster may yet open a link (e.g. one starting)
        self._process: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Future | None = None
        self._readers: set[asyncio.Task] = set()
        self._pending: dict[int, tuple[asyncio.subprocess.Process, asyncio.Future]] = {}  # by request number
        self._numbers = itertools.count(1)
        self.links: dict[int, HostedSchedulerLink] = {}
        self._topics: dict[str, Callable[[str, list[Any]], None]] = {}  # backends' news, by topic
        self._release_timer: asyncio.TimerHandle | None = None
        self._packer = packer()
        self._closed = False
        self._memory_limit: int | None = None

    @property
    def pid(self) -> int | None:
        """The host's process id while it runs."""
        return self._process.pid if self._process is not None and self._process.returncode is None else None

    def warm_up(self) -> None:
        """Start the process now (a first use of clusters), so that the first link finds distributed imported."""
        if self._process is None and self._starting is None and not self._closed:
            asyncio.ensure_future(self.start()).add_done_callback(_log_failure)

    async def start(self) -> None:
        """Start the process now, unless it runs, and return once it is spawned: its import goes on beside the caller."""
        if self._closed:
            return
        try:
            await self._ensure_started()
        finally:
            self.release_when_unused()

    async def memory_limit(self) -> int:
        """Bytes of memory a local worker may use here: distributed's ``MEMORY_LIMIT``, asked once.

        Until the process answers (it starts with the sidebar's first look), or if it cannot, the machine's RAM.
        """
        if self._memory_limit is None:
            try:
                self._memory_limit = int(await self.request({"op": "memory_limit"}, MEMORY_LIMIT_TIMEOUT))
            except Exception as exc:
                self.log.warning("clustermgr_lab: distributed's MEMORY_LIMIT unknown (%s): the machine's RAM", exc)
                return psutil.virtual_memory().total
            finally:
                self.release_when_unused()
        return self._memory_limit

    async def make_credentials(self, credentials: ClusterCredentials) -> None:
        """Write a cluster's fresh TLS files (:meth:`ClusterCredentials.make`), in the process: cryptography is
        imported there, not in the server."""
        try:
            await self.request({"op": "make_credentials", "tls": credentials.to_dict()}, CREDENTIALS_TIMEOUT)
        finally:
            self.release_when_unused()

    async def submit_commands(self, backends: list[str]) -> dict[str, str | None]:
        """Each backend's :meth:`~clustermgr_lab.backends.base.Backend.submit_command`, read in the process: a batch
        backend reads it from its dask-jobqueue ``Job`` class, whose import brings distributed."""
        try:
            return await self.request({"op": "submit_commands", "backends": backends}, CREDENTIALS_TIMEOUT)
        finally:
            self.release_when_unused()

    async def ask(self, message: dict[str, Any], timeout: float) -> Any:
        """A backend's operation (``BackendContext.helper``, :class:`~clustermgr_lab.backends.base.HelperProcess`).

        Raises
        ------
        OSError
            When the process exited or did not answer within ``timeout`` plus :data:`ANSWER_MARGIN`.
        ValueError, RuntimeError
            What the operation raised there.
        """
        try:
            return await self.request(message, timeout)
        except (HostGone, SchedulerTimeout) as exc:
            raise OSError(f"the scheduler links' process did not answer: {exc}") from exc
        finally:
            self.release_when_unused()

    def subscribe(self, topic: str, on_event: Callable[[str, list[Any]], None]) -> None:
        """Hear a backend's news (``{"to": topic, "event", "args"}``), and ``("lost", [])`` if the process exits."""
        self._cancel_release()
        self._topics[topic] = on_event

    def unsubscribe(self, topic: str) -> None:
        self._topics.pop(topic, None)
        self.release_when_unused()

    def next_number(self) -> int:
        return next(self._numbers)

    async def request(self, message: dict[str, Any], timeout: float) -> Any:
        """Send ``message`` (``op`` and its fields) and return the host's answer, or raise its error."""
        if self._closed:
            raise HostGone("the server is stopping: no scheduler links")
        self._cancel_release()
        process = await self._ensure_started()
        number = next(self._numbers)
        answer = asyncio.get_running_loop().create_future()
        self._pending[number] = (process, answer)
        try:
            process.stdin.write(self._packer.pack({**message, "id": number}))
            return await asyncio.wait_for(answer, timeout + ANSWER_MARGIN)
        except asyncio.TimeoutError:
            if answer.done():
                raise
            waited = timeout + ANSWER_MARGIN
            raise SchedulerTimeout(f"the scheduler links' process did not answer within {waited:g} s") from None
        finally:
            self._pending.pop(number, None)

    async def _ensure_started(self) -> asyncio.subprocess.Process:
        if self._process is not None and self._process.returncode is None:
            return self._process
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        try:
            return await asyncio.shield(self._starting)
        finally:
            if self._starting is not None and self._starting.done():
                self._starting = None

    async def _start(self) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "clustermgr_lab.cluster.link_host",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**20,
        )
        self._process = process
        reader = asyncio.ensure_future(self._read(process))
        self._readers.add(reader)
        reader.add_done_callback(self._readers.discard)
        self.log.info("clustermgr_lab: scheduler links run in process %d", process.pid)
        return process

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        messages = unpacker()
        try:
            while chunk := await process.stdout.read(65536):
                messages.feed(chunk)
                for message in messages:
                    self._dispatch(message)
        except Exception:
            self.log.exception("clustermgr_lab: reading the scheduler links' process failed")
        returncode = await process.wait()
        for sent_to, answer in list(self._pending.values()):
            if sent_to is process and not answer.done():
                answer.set_exception(HostGone(f"the scheduler links' process exited ({returncode})"))
        if self._process is not process:  # let go on purpose (no link was open)
            return
        self._process = None
        if self._closed or not (self.links or self._topics):
            return
        self.log.warning("clustermgr_lab: the scheduler links' process exited (%s): subscribing again", returncode)
        for link in list(self.links.values()):
            link.host_lost()
        for on_event in list(self._topics.values()):
            on_event("lost", [])

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "to" in message:
            on_event = self._topics.get(message["to"])
            if on_event is not None:
                on_event(message.get("event"), message.get("args") or [])
            return
        if "event" in message:
            link = self.links.get(message.get("link"))
            if link is not None:
                link.event(message["event"], message.get("args") or [])
            return
        answer = self._pending.get(message.get("id"), (None, None))[1]
        if answer is None or answer.done():
            return  # answered after its request timed out
        if "error" in message:
            answer.set_exception(ERRORS.get(message["error"], RuntimeError)(message.get("message", "")))
        else:
            answer.set_result(message.get("result"))

    # -- links ----------------------------------------------------------------------------------

    def opened(self, link: HostedSchedulerLink) -> None:
        self._cancel_release()
        self.links[link.number] = link

    def closed(self, link: HostedSchedulerLink) -> None:
        self.links.pop(link.number, None)
        self.release_when_unused()

    def release_when_unused(self) -> None:
        """Let the process go ``release_after`` seconds from now, unless a link opens meanwhile."""
        self._cancel_release()
        if not self.links and not self._topics and not self._closed:
            self._release_timer = asyncio.get_running_loop().call_later(self.release_after, self._release_if_unused)

    def _cancel_release(self) -> None:
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None

    def _release_if_unused(self) -> None:
        """Let the process go unless a link is open, a request waits, or a cluster may yet need it (the manager
        asks again when a cluster stops, fails or leaves the list)."""
        self._release_timer = None
        if not self.links and not self._topics and not self._pending and not self._busy():
            # taken now: a request from here on starts a new process rather than write to this one as it ends
            process, self._process = self._process, None
            asyncio.ensure_future(self._stop(process)).add_done_callback(_log_failure)

    async def _stop(self, process: asyncio.subprocess.Process | None) -> None:
        if process is None or process.returncode is not None:
            return
        process.stdin.close()  # the host closes its links and exits
        try:
            await asyncio.wait_for(process.wait(), 10)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
        self.log.info("clustermgr_lab: let go of the scheduler links' process %d", process.pid)

    async def close(self) -> None:
        """At a server stop, after every cluster let go of its link: stop the process."""
        self._closed = True
        self._cancel_release()
        if self._starting is not None:
            await asyncio.gather(self._starting, return_exceptions=True)
        process, self._process = self._process, None
        await self._stop(process)


def _log_failure(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("clustermgr_lab: the scheduler links' process: %s", task.exception())


class HostedSchedulerLink(SchedulerLink):
    """A :class:`~.scheduler_link.SchedulerLink` that runs in the :class:`LinkHost`'s process.

    The same interface and callbacks; its traits (``c.SchedulerLink.*``) are read here and sent with the
    subscription. ``security`` is the cluster's :class:`~clustermgr_lab.common.security.ClusterCredentials`
    (its file paths cross the pipe), not a ``distributed.Security``. ``kind``: which link runs there, one of
    :data:`~.link_host.LINK_KINDS` (``"gateway"``: a gateway cluster's, which also reports each worker that left
    by its gateway name, to ``on_gone``).
    """

    def __init__(
        self,
        host: LinkHost,
        address: str,
        on_added: WorkerAdded,
        on_removed: WorkerRemoved,
        on_lost: Callable[[], None],
        on_responsive: Callable[[bool], None] | None = None,
        security: ClusterCredentials | None = None,
        kind: str = "scheduler",
        on_gone: Callable[[str], None] | None = None,
        **kwargs: Any,
    ):
        super().__init__(address, on_added, on_removed, on_lost, on_responsive=on_responsive, **kwargs)
        self.host = host
        self.kind = kind
        self._on_gone = on_gone
        self.number = host.next_number()
        self._credentials = security
        self._workers: set[str] = set()  # as reported: what a new subscription compares with
        self._seen: set[str] | None = None  # while subscribing again: the workers it reported
        self._resubscribing: asyncio.Task | None = None

    def _subscription(self, timeout: float) -> dict[str, Any]:
        return {
            "op": "start",
            "link": self.number,
            "kind": self.kind,
            "address": self.address,
            "tls": self._credentials.to_dict() if self._credentials is not None else None,
            "traits": {name: getattr(self, name) for name in TRAITS},
            "timeout": timeout,
        }

    async def start(self, timeout: float = 30) -> None:
        self.host.opened(self)
        try:
            await self.host.request(self._subscription(timeout), timeout)
        except BaseException:
            await self.close()  # what the host may have started of it (e.g. an answer that came too late)
            raise

    def event(self, name: str, args: list[Any]) -> None:
        """News of the link in the host's process, handed to this link's callbacks."""
        if self._closing:
            return
        if name == "added":
            self._workers.add(args[0])
            if self._seen is not None:
                self._seen.add(args[0])
            self._on_added(*args)
        elif name == "removed":
            self._workers.discard(args[0])
            self._on_removed(*args)
        elif name == "lost":
            self._on_lost()
        elif name == "responsive":
            self._set_responsive(bool(args[0]))
        elif name == "work" and self.on_work is not None:
            self.on_work(*args)
        elif name == "gone" and self._on_gone is not None:
            self._on_gone(*args)

    def _set_responsive(self, responsive: bool) -> None:
        if responsive != self.responsive:
            self.responsive = responsive
            if self._on_responsive is not None:
                self._on_responsive(responsive)

    def host_lost(self) -> None:
        """The host exited: subscribe again in a new one (shown not answering until then)."""
        if self._closing or self._resubscribing is not None:
            return
        self._resubscribing = asyncio.ensure_future(self._subscribe_again())

    async def _subscribe_again(self) -> None:
        self._set_responsive(False)
        self._seen = set()
        try:
            await self.host.request(self._subscription(self.call_timeout), self.call_timeout)
        except Exception as exc:
            log.warning("scheduler %s: subscribing again failed: %s", self.address, exc)
            self._resubscribing = None
            if not self._closing:
                self._on_lost()
            return
        for address in self._workers - self._seen:  # left while no one listened
            self._workers.discard(address)
            self._on_removed(address)
        self._seen = None
        self._resubscribing = None
        self._set_responsive(True)

    async def _call_in_host(self, method: str, timeout: float, **kwargs: Any) -> Any:
        return await self.host.request({"op": "call", "link": self.number, "method": method, "kwargs": kwargs}, timeout)

    async def load(self, target_duration: float) -> dict[str, Any]:
        return await self._call_in_host("load", self.call_timeout, target_duration=target_duration)

    async def workers_to_close(self, candidates: list[str], n: int) -> list[str]:
        return await self._call_in_host("workers_to_close", self.call_timeout, candidates=candidates, n=n)

    async def worker_metrics(self) -> dict[str, dict[str, float]]:
        return await self._call_in_host("worker_metrics", self.call_timeout)

    async def set_idle_timeout(self, seconds: float | None) -> None:
        await self._call_in_host("set_idle_timeout", self.call_timeout, seconds=seconds)

    async def retire_workers(self, addresses: list[str], close: bool = False) -> list[str]:
        return await self._call_in_host("retire_workers", self.retire_timeout, addresses=addresses, close=close)

    async def close(self) -> None:
        self._closing = True
        if self._resubscribing is not None:
            self._resubscribing.cancel()
            await asyncio.gather(self._resubscribing, return_exceptions=True)
        if self.number not in self.host.links or self.host.pid is None:  # never started, or its host is gone
            self.host.closed(self)
            return
        try:
            await self.host.request({"op": "close", "link": self.number}, self.call_timeout)
        except Exception as exc:  # a host that is gone has closed it already
            log.debug("closing the link to %s: %s", self.address, exc)
        finally:
            self.host.closed(self)


async def hosted_scheduler_identity(
    host: LinkHost, address: str, timeout: float = 10, security: ClusterCredentials | None = None
) -> dict[str, Any]:
    """:func:`~.scheduler_link.scheduler_identity`, asked from the host's process."""
    tls = security.to_dict() if security is not None else None
    return await host.request({"op": "identity", "address": address, "tls": tls, "timeout": timeout}, timeout)
