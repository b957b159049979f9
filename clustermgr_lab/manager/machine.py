"""What this machine has for local workers: its memory, and the NVIDIA GPUs a driver reports.

The memory a local worker may use (distributed's ``MEMORY_LIMIT``: RAM, cgroup and rlimit) is asked from
the scheduler links' process, which has distributed imported (:meth:`~clustermgr_lab.cluster.hosted_link.LinkHost.memory_limit`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psutil

NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")


def total_memory() -> int:
    """Bytes of RAM on this machine."""
    return psutil.virtual_memory().total


def detect_gpus() -> int:
    """How many NVIDIA GPUs this machine has: pynvml when importable, else ``nvidia-smi -L``, else the driver's
    ``/proc/driver/nvidia/gpus``; 0 when none of them finds any.

    Called once, when the server starts (``nvidia-smi`` may take a moment), never on the event loop per request.
    """
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # not installed, no driver, no device: try the next way
        pass
    if shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
            return sum(1 for line in listed.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        return sum(1 for _ in NVIDIA_PROC.iterdir())
    except OSError:
        return 0
