"""What every queueing system shares: running its commands off the event loop, its dask-jobqueue ``Job`` class, a job's state."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

from clustermgr_lab.domain.errors import BackendError


async def run_command(*command: str, timeout: float = 60, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """Run a queueing-system command without blocking the event loop; returns (returncode, stdout, stderr).

    ``env``: variables set on top of the server's environment (e.g. ``SLURM_CONF``).
    """
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **env} if env else None,
        )
    except OSError as exc:
        raise BackendError(f"cannot run {command[0]}: {exc}") from exc
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise BackendError(f"{command[0]} did not answer within {timeout:g} s") from None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def jobqueue_class(module: str, name: str):
    """A dask-jobqueue ``Job`` class, imported on first use.

    Importing dask_jobqueue replaces the process's SIGINT handler (``dask_jobqueue/runner.py``
    calls ``signal.signal(SIGINT, sys.exit)`` at import); the Jupyter server's own handler is put back.
    """
    sigint = signal.getsignal(signal.SIGINT)
    job_class = getattr(__import__(f"dask_jobqueue.{module}", fromlist=[name]), name)
    if sigint is not None and signal.getsignal(signal.SIGINT) is not sigint:
        signal.signal(signal.SIGINT, sigint)
    return job_class


@dataclass(frozen=True)
class JobState:
    """A job as the queueing system lists it: its name, whether it still queues or runs, and why it waits."""

    name: str
    active: bool
    pending_reason: str | None = None  # None once it runs
    #: no worker runs any more, but the system still lists it while it cleans up (SLURM's COMPLETING)
    finishing: bool = False
    #: the system's own word for the state (SLURM: RUNNING, NODE_FAIL, TIMEOUT...), when it gives one
    state: str | None = None


class SubmitRefused(BackendError):
    """The queueing system refused a job (unknown partition, bad account, impossible request...)."""
