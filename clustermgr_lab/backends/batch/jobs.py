"""What every queueing system shares: running its commands off the event loop, its job scripts, a job's state.

The job scripts are dask-jobqueue's: a :class:`JobRequest` names a ``Job`` class and its arguments, and
:func:`write_job` makes the ``Job`` and keeps of it what submitting needs (:class:`JobText`). Importing
dask-jobqueue imports distributed (NumPy with it, about 30 MiB a process keeps for its life), so a server
has its scheduler links' process write them (``BackendContext.helper``, operation ``write_job``); the server itself reads only
the site's ``jobqueue.*`` settings, with dask's configuration, and parses job ids
(:func:`job_id_from_submit_output`, as dask-jobqueue does).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clustermgr_lab.domain.errors import BackendError

#: Seconds writing a job script in the helper process may take (its start and import of dask-jobqueue included).
WRITE_TIMEOUT = 30.0


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
class JobRequest:
    """A dask-jobqueue ``Job`` to write: its class (``dask_jobqueue.<module>.<class_name>``) and arguments.

    ``command`` replaces the command the job runs (a worker's, by default): the scheduler's job runs
    ``dask scheduler``. Crosses to the scheduler links' process as :meth:`to_message`.
    """

    module: str
    class_name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    command: str | None = None

    def to_message(self) -> dict[str, Any]:
        return {"module": self.module, "class_name": self.class_name, "kwargs": self.kwargs, "command": self.command}

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> JobRequest:
        return cls(message["module"], message["class_name"], dict(message.get("kwargs") or {}), message.get("command"))


@dataclass(frozen=True)
class JobText:
    """What submitting a job needs of its dask-jobqueue ``Job``: the script, the submit command, the job id pattern."""

    script: str
    submit_command: str
    job_id_regexp: str

    def to_message(self) -> dict[str, str]:
        return {"script": self.script, "submit_command": self.submit_command, "job_id_regexp": self.job_id_regexp}

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> JobText:
        return cls(str(message["script"]), str(message["submit_command"]), str(message["job_id_regexp"]))


def write_job(request: JobRequest, jobqueue_config: Mapping[str, Any] | None = None) -> JobText:
    """Make the ``Job`` of ``request`` (imports dask-jobqueue) and return its :class:`JobText`.

    ``jobqueue_config``: the requesting server's ``jobqueue`` settings, laid over this process's while the
    ``Job`` reads its defaults (a site's ``jobqueue.yaml``, ``DASK_JOBQUEUE__*``, what the server set at
    run time); None: this process's own. Raises what the ``Job`` class raises for bad arguments
    (e.g. a ``ValueError`` when no ``cores`` are given anywhere).

    Examples
    --------
    >>> request = JobRequest("slurm", "SLURMJob", {"cores": 1, "memory": "1 GiB", "name": "w-1", "python": "python3"})
    >>> text = write_job(request)
    >>> text.submit_command, text.script.splitlines()[0], "w-1" in text.script.splitlines()[-1]
    ('sbatch', '#!/usr/bin/env bash', True)
    """
    import dask.config

    job_class = jobqueue_class(request.module, request.class_name)
    if jobqueue_config is None:
        job = job_class(**request.kwargs)
    else:
        merged = dask.config.merge(dask.config.get("jobqueue", {}), dict(jobqueue_config))
        with dask.config.set({"jobqueue": merged}):
            job = job_class(**request.kwargs)
    if request.command is not None:
        job._command_template = request.command
    return JobText(job.job_script(), job.submit_command, job.job_id_regexp)


def write_job_message(message: Mapping[str, Any]) -> dict[str, str]:
    """The ``write_job`` operation where it runs (the scheduler links' process): ``{"job", "jobqueue"}`` (a :meth:`JobRequest.to_message` and the
    requesting server's ``jobqueue`` settings) to :meth:`JobText.to_message`."""
    return write_job(JobRequest.from_message(message["job"]), message.get("jobqueue")).to_message()


def job_id_from_submit_output(regexp: str, out: str) -> str:
    """The job id in a submit command's output: the ``job_id`` group of ``regexp``, as dask-jobqueue's ``Job`` reads it.

    Raises
    ------
    ValueError
        When ``regexp`` does not match, or has no ``job_id`` group (dask-jobqueue's words).

    Examples
    --------
    >>> job_id_from_submit_output(r"(?P<job_id>\\d+)", "Submitted batch job 42")
    '42'
    """
    match = re.search(regexp, out)
    if match is None:
        raise ValueError(
            f"Could not parse job id from submission command output.\nJob id regexp is {regexp!r}\n"
            f"Submission command output is:\n{out}"
        )
    job_id = match.groupdict().get("job_id")
    if job_id is None:
        raise ValueError(
            "You need to use a 'job_id' named group in your regexp, e.g. r'(?P<job_id>\\d+)'. "
            f"Your regexp was: {regexp!r}"
        )
    return job_id


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
