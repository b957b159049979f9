"""Reading a cluster's log files in bounded pieces: the last lines of a file of any size, and what was appended since.

Nothing here reads a whole file: :func:`tail` seeks to the end and reads backwards block by block
until it has its lines (or ``max_bytes``), :func:`read_from` reads at most ``max_bytes`` from an
offset. Both are blocking file I/O: the web layer runs them in an executor.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustermgr_lab.domain.errors import InvalidRequest, NotFound

#: What a log name may look like: no separators, no leading dot, so that a name can never leave the folder.
LOG_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
BLOCK = 64 * 1024
DEFAULT_TAIL_LINES = 200
MAX_TAIL_LINES = 100_000
#: The most one reply carries, counted as JSON (a log of long lines is cut at this, oldest part first).
MAX_BYTES = 4 * 2**20


@dataclass(frozen=True)
class LogChunk:
    """A piece of a log file: its text, where it starts and ends in the file (bytes), and the file's size."""

    text: str
    start: int
    end: int
    size: int

    def to_dict(self) -> dict:
        return {"text": self.text, "start": self.start, "offset": self.end, "size": self.size}


def _open(path: Path):
    """``path`` opened for reading, if it is a regular file: never a symbolic link (followed elsewhere) or a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileNotFoundError(errno.ENOENT, "a symbolic link, not a log file", str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileNotFoundError(errno.ENOENT, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def _encoded_size(text: str) -> int:
    """Bytes ``text`` takes in a JSON answer: an escaped byte (``\\u0001``, ``\\ufffd``) takes up to 6."""
    return len(json.dumps(text)) - 2  # the quotes are the answer's, not the text's


def _within(read, max_bytes: int) -> LogChunk:
    """``read(budget)`` with a budget of bytes of the file made smaller until its text fits ``max_bytes`` as JSON."""
    budget = max_bytes
    chunk = read(budget)
    for _ in range(8):
        size = _encoded_size(chunk.text)
        if size <= max_bytes or budget <= 1:
            break
        # at least the excess (each byte takes 1 to 6 as JSON), at most in proportion to it
        budget = max(1, budget * max_bytes // size, budget - (size - max_bytes))
        chunk = read(budget)
    return chunk


def tail(path: Path, lines: int = DEFAULT_TAIL_LINES, max_bytes: int = MAX_BYTES) -> LogChunk:
    """The last ``lines`` lines of ``path``, read backwards from its end in blocks (at most ``max_bytes`` as JSON).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
    ...     _ = f.write("one\\ntwo\\nthree\\n")
    >>> tail(Path(f.name), 2).text
    'two\\nthree\\n'
    """
    return _within(lambda budget: _tail(path, lines, budget), max_bytes)


def _tail(path: Path, lines: int, max_bytes: int) -> LogChunk:
    with _open(path) as log:
        size = log.seek(0, os.SEEK_END)
        end, start, blocks, newlines = size, size, [], 0
        # One newline more than lines wanted (the file's last byte is usually one).
        while start > 0 and newlines <= lines and size - start < max_bytes:
            step = min(BLOCK, start, max_bytes - (size - start))
            start -= step
            log.seek(start)
            block = log.read(step)
            blocks.append(block)
            newlines += block.count(b"\n")
    data = b"".join(reversed(blocks))
    kept = data.splitlines(keepends=True)
    if start > 0 and len(kept) > 1:  # the first line read is cut in the middle (unless it is all there is)
        start += len(kept[0])
        kept = kept[1:]
    if len(kept) > lines:
        start += sum(len(line) for line in kept[: len(kept) - lines])
        kept = kept[len(kept) - lines :]
    return LogChunk(b"".join(kept).decode(errors="replace"), start, end, size)


def read_from(path: Path, offset: int, max_bytes: int = MAX_BYTES) -> LogChunk:
    """What ``path`` holds from byte ``offset`` on, at most ``max_bytes`` as JSON (cut after the last whole line).

    A file that is now shorter than ``offset`` (rotated or truncated) is read from its start.
    """
    return _within(lambda budget: _read_from(path, offset, budget), max_bytes)


def _read_from(path: Path, offset: int, max_bytes: int) -> LogChunk:
    with _open(path) as log:
        size = log.seek(0, os.SEEK_END)
        if offset > size:
            offset = 0
        log.seek(offset)
        data = log.read(min(max_bytes, size - offset))
    if offset + len(data) < size and b"\n" in data:
        data = data[: data.rindex(b"\n") + 1]
    return LogChunk(data.decode(errors="replace"), offset, offset + len(data), size)


def read_tail(path: Path, max_bytes: int = 65536) -> str:
    """The last ``max_bytes`` of a file as text ('' if it cannot be read): enough for the lines a process wrote last."""
    try:
        return tail(path, MAX_TAIL_LINES, max_bytes).text
    except OSError:
        return ""


def log_file(files: dict[str, Path], name: str, cluster_id: str) -> Path:
    """The file of log ``name`` among ``files`` (a backend's listing), or NotFound; a name is never a path."""
    if not LOG_NAME.fullmatch(name) or name not in files:
        raise NotFound(f"cluster {cluster_id} has no log called {name!r}", field="name")
    return files[name]


def parse_tail(value: str | None) -> int:
    """The ``tail`` query parameter: a count of lines, 1 to :data:`MAX_TAIL_LINES`."""
    if value is None:
        return DEFAULT_TAIL_LINES
    try:
        lines = int(value)
    except ValueError:
        raise InvalidRequest(f"tail must be a whole number of lines, not {value!r}", field="tail") from None
    if not 1 <= lines <= MAX_TAIL_LINES:
        raise InvalidRequest(f"tail must be between 1 and {MAX_TAIL_LINES} lines, not {lines}", field="tail")
    return lines


def parse_offset(value: str | None) -> int | None:
    """The ``offset`` query parameter: a byte offset (0 or more), or None when not given."""
    if value is None:
        return None
    try:
        offset = int(value)
    except ValueError:
        raise InvalidRequest(f"offset must be a whole number of bytes, not {value!r}", field="offset") from None
    if offset < 0:
        raise InvalidRequest(f"offset must be 0 or more, not {offset}", field="offset")
    return offset


def _describe(files: dict[str, Path]) -> dict[str, tuple[int, float]]:
    sizes = {}
    for name, path in files.items():
        try:
            stat = path.stat()
        except OSError:
            continue
        sizes[name] = (stat.st_size, stat.st_mtime)
    return sizes


async def list_logs(cluster: Any) -> list[dict[str, Any]]:
    """The logs of ``cluster`` (a :class:`~.cluster.ManagedCluster`): the scheduler's first, then each worker's.

    Each ``{name, worker, group, state, size, modified}``; ``state`` is the worker's (``running``,
    ``pending``, ``stopping``, or ``gone`` for one that went away) or, for the scheduler's, the cluster's status.
    """
    loop = asyncio.get_running_loop()
    backend = cluster.backend
    files = await loop.run_in_executor(None, backend.log_files)
    sizes = await loop.run_in_executor(None, _describe, files)
    states = cluster.reconciler.worker_states()
    groups = {name: record.group for name, record in cluster.reconciler.workers.items()}
    entries = []
    for name, (size, modified) in sizes.items():
        worker = backend.log_owner(name)
        entries.append(
            {
                "name": name,
                "worker": worker,
                "group": groups.get(worker) if worker else None,
                "state": states.get(worker, "gone") if worker else cluster.status,
                "size": size,
                "modified": modified,
            }
        )
    entries.sort(key=lambda e: (e["worker"] is not None, _natural(e["name"])))
    return entries


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


async def read_log(cluster: Any, name: str, lines: int, offset: int | None) -> dict[str, Any]:
    """Log ``name`` of ``cluster``: its last ``lines`` lines, or what follows byte ``offset`` when given."""
    loop = asyncio.get_running_loop()
    path = log_file(await loop.run_in_executor(None, cluster.backend.log_files), name, cluster.id)
    try:
        if offset is None:
            chunk = await loop.run_in_executor(None, tail, path, lines)
        else:
            chunk = await loop.run_in_executor(None, read_from, path, offset)
    except FileNotFoundError:
        raise NotFound(f"the log {name!r} of cluster {cluster.id} is gone", field="name") from None
    return {"name": name, **chunk.to_dict()}
