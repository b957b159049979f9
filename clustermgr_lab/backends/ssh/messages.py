"""What a worker's start over SSH takes and how it fails: both cross the pipe to the helper process as they are.

Light on purpose: the server's side (:mod:`.hosted`, :mod:`.backend`) imports it without distributed.

>>> request = WorkerStart(name="default-1", host="node1", scheduler="tls://10.0.0.5:8786", connect_options={},
...                       kwargs={"nthreads": 1}, remote_python="python3", log_path="/tmp/default-1.log")
>>> WorkerStart.from_message(request.to_message()) == request
True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


class StartFailed(Exception):
    """A worker did not start; the message says which, where, the remote exit status and the remote output."""


@dataclass(frozen=True)
class WorkerStart:
    """What starting one worker over SSH takes.

    ``remote_python`` is the remote command before ``-m distributed.cli.dask_spec`` (``env K=V .../python``);
    ``kwargs`` the Nanny's; ``log_path`` the file its output is copied to. ``timeout``: seconds it gets to
    start; ``command_timeout``: an SSH command (a kill); ``stop_timeout``: a signalled worker, before ``KILL``.
    """

    name: str
    host: str
    scheduler: str
    connect_options: dict[str, Any]
    kwargs: dict[str, Any]
    remote_python: str
    log_path: str
    timeout: float = 60.0
    command_timeout: float = 30.0
    stop_timeout: float = 10.0

    def to_message(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> WorkerStart:
        return cls(**{f.name: message[f.name] for f in fields(cls) if f.name in message})
