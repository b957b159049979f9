"""Whether a backend can work on this server now: its queueing system's commands exist and its controller answers.

The checks run commands (``shutil.which``, ``scontrol ping``): call :func:`unavailable_reason` in an executor
(and :func:`submit_command` on the main thread).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess

PING_TIMEOUT = 5.0  # seconds `scontrol ping` may take before the controller counts as not answering


def submit_command(backend_class: type) -> str | None:
    """The command that submits a batch backend's jobs (e.g. ``sbatch``), or None for a backend without one.

    Call it on the main thread: importing dask-jobqueue touches signal handlers.

    Examples
    --------
    >>> from clustermgr_lab.backends import BACKENDS
    >>> submit_command(BACKENDS["slurm"]), submit_command(BACKENDS["local"])
    ('sbatch', None)
    """
    job_class = getattr(backend_class, "job_class", None)
    if job_class is None:  # not a batch backend: nothing outside this server to check
        return None
    try:
        return shlex.split(job_class().submit_command)[0]
    except Exception:  # dask-jobqueue missing or broken: the backend's own error says more
        return None


def unavailable_reason(backend_name: str, submit: str | None) -> str | None:
    """Why clusters of backend ``backend_name`` (submitting with ``submit``) cannot work here now, or None (blocking).

    Examples
    --------
    >>> unavailable_reason("lsf", "no-such-bsub")
    '`no-such-bsub` is not installed on this server (not on its PATH)'
    """
    if submit is None:
        return None
    if shutil.which(submit) is None:
        return f"`{submit}` is not installed on this server (not on its PATH)"
    if backend_name == "slurm":
        return _slurm_controller_problem()
    return None


def _slurm_controller_problem() -> str | None:
    """Why the SLURM controller cannot take jobs now (``scontrol ping``), or None when it answers."""
    if shutil.which("scontrol") is None:
        return None  # sbatch alone is enough; its own error says more when it is refused
    try:
        result = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=PING_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return f"the SLURM controller did not answer within {PING_TIMEOUT:g} s (scontrol ping)"
    except OSError as exc:
        return f"scontrol ping could not run: {exc}"
    answer = (result.stdout + result.stderr).strip()
    if result.returncode != 0 or "DOWN" in answer or "UP" not in answer:
        return f"the SLURM controller does not answer: {answer.splitlines()[-1] if answer else 'scontrol ping failed'}"
    return None
