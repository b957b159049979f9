"""Whether a backend can work on this server now: its queueing system's commands exist and its controller answers.

The checks run commands (``shutil.which``, ``scontrol ping``): call :func:`unavailable_reason` in an executor
(the backends' ``submit_command()`` are read first: in the scheduler links' process where the server has one).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterable

from clustermgr_lab.backends.base import Backend

#: ``names -> {name: submit command or None}``: the backends' submit commands (:meth:`Backend.submit_command`).
SubmitCommands = Callable[[list[str]], Awaitable[dict[str, "str | None"]]]
PING_TIMEOUT = 5.0  # seconds `scontrol ping` may take before the controller counts as not answering
AVAILABILITY_TTL = 10.0  # seconds a check of the backends' commands and controllers is reused
SUBMIT_TIMEOUT = 30.0  # seconds a resource gets to take a new cluster while its request waits (Backend.create_ahead)
PROBE_TIMEOUT = 5.0  # seconds a template's resource (e.g. its gateway) gets to answer whether it can be used


class Availability:
    """Why each backend cannot work here, as last checked (None: it can); checked at most every ``AVAILABILITY_TTL`` s."""

    def __init__(self, submit_commands: SubmitCommands | None = None) -> None:
        self._reasons: dict[str, str | None] = {}
        self._checked = 0.0
        # each backend's submit command, asked elsewhere (the server's: the scheduler links' process, where reading
        # it from a dask-jobqueue Job class imports distributed); None: here
        self._submit_commands = submit_commands

    def reason(self, backend_name: str) -> str | None:
        return self._reasons.get(backend_name)

    async def check(self, backend_classes: Iterable[type[Backend]]) -> None:
        """Check, in a thread, whether ``backend_classes`` can work here (their submit commands are read first)."""
        loop = asyncio.get_running_loop()
        if self._checked and loop.time() - self._checked < AVAILABILITY_TTL:
            return
        backend_classes = list(backend_classes)
        submits = None
        if self._submit_commands is not None:
            try:
                submits = await self._submit_commands(sorted({cls.name for cls in backend_classes}))
            except Exception:  # that process cannot be reached: read them here after all
                submits = None
        if submits is None:
            submits = {cls.name: cls.submit_command() for cls in backend_classes}

        def check() -> dict[str, str | None]:
            return {name: unavailable_reason(name, submit) for name, submit in submits.items()}

        self._reasons = await loop.run_in_executor(None, check)
        self._checked = loop.time()


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
