"""The server's line to schedulers it did not start: bounded, pickle-free messages, and observation by polling.

A foreign scheduler (attached, or discovered in a notebook) is an untrusted peer and someone
else's cluster. So, unlike :class:`~clustermgr_lab.cluster.scheduler_link.SchedulerLink`:

- messages are read with a size cap (:data:`MAX_MESSAGE_BYTES`) checked *before* anything is
  allocated, and decoded as plain msgpack: distributed's own comm would allocate whatever length
  header the peer sends and unpickle any ``__Pickled__`` value it sends;
- decoding is bounded too, and off the event loop: at most :data:`MAX_ITEMS` values (32 MiB of
  empty maps would otherwise be 33 million dicts, gigabytes), decoded in a thread;
- a large identity is read less often: the poll waits a second per :data:`POLL_BYTES_PER_SECOND`
  of the last answer (a 27 MiB identity every 27 s, not every second);
- its workers are observed by polling ``identity`` (:class:`ForeignSchedulerLink`), never by
  ``subscribe_worker_status``: that registers a scheduler plugin under a fixed name and so takes
  the worker stream away from the user's own ``LocalCluster`` object (its ``scheduler_info``,
  ``wait_for_workers`` and ``adapt()`` stop seeing workers);
- every identity passes :func:`~clustermgr_lab.foreign.identity.parse_identity`.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack

from clustermgr_lab.common.addresses import parse_address, parse_host_port
from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.errors import Conflict
from clustermgr_lab.domain.fields import printable
from clustermgr_lab.foreign.identity import MAX_WORKERS, ForeignIdentity, InvalidIdentity, parse_identity

if TYPE_CHECKING:
    from clustermgr_lab.common.security import ClusterCredentials

log = logging.getLogger(__name__)

#: Largest message accepted from a foreign scheduler, all frames together (an identity of
#: :data:`~clustermgr_lab.foreign.identity.MAX_WORKERS` workers is a few MiB).
MAX_MESSAGE_BYTES = 32 * 2**20
MAX_FRAMES = 64
#: Most values (map keys and values, array items) one message may decode to: an identity of
#: :data:`~clustermgr_lab.foreign.identity.MAX_WORKERS` workers has about 90 per worker (370,000).
MAX_ITEMS = 1_000_000
#: Most items of one map or array (a worker map has at most MAX_WORKERS entries).
MAX_CONTAINER = 65_536
#: Bytes of the last answer that buy one more second between two polls (beyond ``poll_interval``).
POLL_BYTES_PER_SECOND = 2**20
_LENGTH = struct.Struct("<Q")
NOT_OURS = "its workers are started and stopped by whoever started it, not by this server"


class ForeignSchedulerError(Exception):
    """A foreign scheduler could not be reached or answered something unacceptable; ``str()`` says which."""


class MessageTooLarge(ForeignSchedulerError):
    """A foreign scheduler announced a message larger than :data:`MAX_MESSAGE_BYTES`."""


class _TooManyItems(Exception):
    pass


def decode(payload: bytes, max_items: int = MAX_ITEMS) -> Any:
    """Plain msgpack (never unpickled) of at most ``max_items`` values; :class:`ForeignSchedulerError` otherwise.

    Each map and array is counted as it is completed (its own items made it already, and were counted
    when they completed), so no more than ``max_items`` plus one container's items ever exist.

    Examples
    --------
    >>> decode(b"\\x92\\x80\\x80")
    ({}, {})
    >>> decode(b"\\x93\\x80\\x80\\x80", max_items=2)
    Traceback (most recent call last):
    ...
    clustermgr_lab.foreign.scheduler.ForeignSchedulerError: a message of more than 2 values
    """
    seen = 0

    def counted(container):
        nonlocal seen
        seen += len(container) * (2 if isinstance(container, dict) else 1)
        if seen > max_items:
            raise _TooManyItems
        return container

    try:
        # The hooks only count: a '__Pickled__' or '__Serialized__' value stays a plain dict, never unpickled.
        # Arrays are tuples, as distributed decodes them: a map key may be one (a busy worker's
        # metrics["digests_total_since_heartbeat"] is keyed by ("execute", prefix, ...) tuples).
        return msgpack.unpackb(
            payload, raw=False, strict_map_key=False, use_list=False, object_hook=counted, list_hook=counted,
            max_array_len=MAX_CONTAINER, max_map_len=MAX_CONTAINER,
        )  # fmt: skip
    except _TooManyItems:
        raise ForeignSchedulerError(f"a message of more than {max_items} values") from None
    except Exception as exc:
        raise ForeignSchedulerError(f"a message that is not msgpack: {exc}") from None


def _frame(message: Any) -> bytes:
    payload = msgpack.dumps(message, use_bin_type=True)
    prelude = struct.pack("<QQ", 1, len(payload))
    return _LENGTH.pack(len(prelude) + len(payload)) + prelude + payload


class ForeignComm:
    """One connection to a foreign scheduler speaking distributed's TCP framing, with bounds.

    Parameters
    ----------
    address : str
        ``tcp://host:port`` (or ``tls://host:port``: then ``ssl_context`` makes the connection).
    timeout : float
        Seconds for connecting (and the handshake) and for each call.
    max_bytes : int
        Largest message accepted; a larger length header closes the connection unread.
    """

    def __init__(
        self,
        address: str,
        timeout: float = 10.0,
        max_bytes: int = MAX_MESSAGE_BYTES,
        ssl_context: ssl.SSLContext | None = None,
    ):
        self.address = address
        self.ssl_context = ssl_context
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.last_size = 0  # bytes of the last message read

    async def connect(self) -> None:
        scheme, location = parse_address(self.address)
        host, port = parse_host_port(location)
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=self.ssl_context), self.timeout
            )
            # distributed's handshake: both sides send their settings first (no compression: plain frames)
            self._writer.write(
                _frame({"compression": None, "python": tuple(sys.version_info)[:3], "pickle-protocol": 5})
            )
            await asyncio.wait_for(self._read(), self.timeout)
        except asyncio.TimeoutError:
            self.abort()
            raise ForeignSchedulerError(f"no answer from {self.address} within {self.timeout:g} s") from None
        except OSError as exc:
            self.abort()
            raise ForeignSchedulerError(f"cannot connect: {exc.strerror or exc}") from None

    async def call(self, op: str, **arguments: Any) -> Any:
        """Call the handler ``op`` and return its answer (decoded as plain msgpack)."""
        if self._writer is None:
            await self.connect()
        try:
            self._writer.write(_frame({"op": op, "reply": True, **arguments}))
            answer = await asyncio.wait_for(self._read(), self.timeout)
        except asyncio.TimeoutError:
            self.abort()
            raise ForeignSchedulerError(f"{self.address} did not answer {op!r} within {self.timeout:g} s") from None
        except (OSError, asyncio.IncompleteReadError) as exc:
            self.abort()
            raise ForeignSchedulerError(f"lost the connection to {self.address}: {exc!r}") from None
        except ForeignSchedulerError:
            self.abort()
            raise
        if isinstance(answer, dict) and answer.get("status") in ("uncaught-error", "error"):
            # its text is the peer's: escape sequences and line breaks are shown escaped, never passed on
            raise ForeignSchedulerError(
                f"{self.address} failed {op!r}: {printable(str(answer.get('exception'))[:200])}"
            )
        return answer

    async def _read(self) -> Any:
        (length,) = _LENGTH.unpack(await self._reader.readexactly(_LENGTH.size))
        if length > self.max_bytes:
            raise MessageTooLarge(
                f"{self.address} announced a message of {length} bytes; at most {self.max_bytes} are accepted"
            )
        data = await self._reader.readexactly(length)
        if len(data) < 8:
            raise ForeignSchedulerError(f"{self.address} sent a malformed message")
        (count,) = _LENGTH.unpack_from(data)
        if not 1 <= count <= MAX_FRAMES or len(data) < 8 * (count + 1):
            raise ForeignSchedulerError(f"{self.address} sent a malformed message ({count} frames)")
        lengths = struct.unpack_from(f"<{count}Q", data, 8)
        start = 8 * (count + 1)
        if sum(lengths) + start > self.max_bytes:
            raise MessageTooLarge(f"{self.address} announced frames of {sum(lengths)} bytes; at most {self.max_bytes}")
        # Frames beyond the first length-prefixed block follow on the wire; only the first (msgpack) is used.
        missing = start + sum(lengths) - length
        if missing > 0:
            await self._reader.readexactly(missing)
        self.last_size = length
        payload = data[start : start + lengths[0]]
        del data
        try:  # in a thread: even a bounded message of 32 MiB takes the CPU for a while
            return await asyncio.get_running_loop().run_in_executor(None, decode, payload)
        except ForeignSchedulerError as exc:
            raise ForeignSchedulerError(f"{self.address} sent {exc}") from None

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.transport.abort()
        self._reader = self._writer = None

    async def close(self) -> None:
        self.abort()


async def foreign_identity(
    address: str, timeout: float = 10.0, comm: ForeignComm | None = None, ssl_context: ssl.SSLContext | None = None
) -> ForeignIdentity:
    """A foreign scheduler's checked identity (over TLS with ``ssl_context``); :class:`ForeignSchedulerError` saying why not."""
    own = comm is None
    comm = comm or ForeignComm(address, timeout, ssl_context=ssl_context)
    try:
        answer = await comm.call("identity", n_workers=MAX_WORKERS)
    finally:
        if own:
            await comm.close()
    try:
        return parse_identity(answer)
    except InvalidIdentity as exc:
        raise ForeignSchedulerError(f"{address} sent an identity this server does not accept: {exc}") from None


class ForeignSchedulerLink:
    """Observes a foreign scheduler's workers by polling its ``identity``; registers nothing on it.

    The same interface as :class:`~clustermgr_lab.cluster.scheduler_link.SchedulerLink` for the cluster:
    ``on_added`` / ``on_removed`` per worker, ``on_lost`` once the scheduler is gone (or answers
    something unacceptable: :attr:`lost_reason` says why), ``on_responsive`` when it stops or
    resumes answering. Every poll doubles as the heartbeat.
    """

    poll_interval = 1.0
    heartbeat_interval = 1.0
    heartbeat_timeout = 5.0

    def __init__(
        self,
        address: str,
        on_added: Callable[[str, dict], None],
        on_removed: Callable[[str], None],
        on_lost: Callable[[], None],
        on_responsive: Callable[[bool], None] | None = None,
        parent: object = None,  # the same signature as SchedulerLink's; nothing here is configurable
        security: ClusterCredentials | None = None,
    ):
        self.address = address
        self._on_added = on_added
        self._on_removed = on_removed
        self._on_lost = on_lost
        self._on_responsive = on_responsive
        self._security = security
        self._comm = ForeignComm(address, self.heartbeat_timeout)
        self._workers: dict[str, dict] = {}
        self._poller: asyncio.Task | None = None
        self._closing = False
        self.responsive = True
        self.lost_reason: str | None = None

    async def start(self, timeout: float = 30) -> None:
        self._comm.timeout = min(timeout, 10.0)
        if self._security is not None:  # reading the certificate files: in a thread, never on the event loop
            self._comm.ssl_context = await self._security.ssl_context_off_loop(self._comm.timeout)
        self._apply(await foreign_identity(self.address, comm=self._comm))
        self._comm.timeout = self.heartbeat_timeout
        self._poller = asyncio.ensure_future(self._poll())

    def _apply(self, identity: ForeignIdentity) -> None:
        for address in set(self._workers) - set(identity.workers):
            del self._workers[address]
            self._on_removed(address)
        for address, info in identity.workers.items():
            if address not in self._workers:
                self._workers[address] = info
                self._on_added(address, info)

    async def _poll(self) -> None:
        while not self._closing:
            # a large answer is not read again every second: a second more per POLL_BYTES_PER_SECOND of it
            await asyncio.sleep(max(self.poll_interval, self._comm.last_size / POLL_BYTES_PER_SECOND))
            try:
                identity = await foreign_identity(self.address, comm=self._comm)
            except asyncio.CancelledError:
                raise
            except ForeignSchedulerError as exc:
                if "did not answer" in str(exc):
                    self._set_responsive(False)
                    continue
                self.lost_reason = str(exc)
                break
            self._set_responsive(True)
            self._apply(identity)
        if not self._closing:
            log.warning("stopped observing the scheduler at %s: %s", self.address, self.lost_reason)
            self._on_lost()

    def _set_responsive(self, responsive: bool) -> None:
        if responsive != self.responsive:
            self.responsive = responsive
            log.warning("scheduler %s is %s", self.address, "answering again" if responsive else "not answering")
            if self._on_responsive is not None:
                self._on_responsive(responsive)

    async def load(self, target_duration: float) -> dict[str, Any]:
        raise Conflict(f"the scheduler at {self.address} is observed only: {NOT_OURS}")

    async def workers_to_close(self, candidates: list[str], n: int) -> list[str]:
        raise Conflict(f"the scheduler at {self.address} is observed only: {NOT_OURS}")

    async def retire_workers(self, addresses: list[str]) -> list[str]:
        raise Conflict(f"the scheduler at {self.address} is observed only: {NOT_OURS}")

    async def set_idle_timeout(self, seconds: float | None) -> None:
        raise Conflict(f"the scheduler at {self.address} is observed only: {NOT_OURS}")

    async def close(self) -> None:
        self._closing = True
        if self._poller is not None:
            await cancel_and_wait(self._poller)
        await self._comm.close()
