"""What this machine has for local workers: its memory, and the NVIDIA GPUs a driver reports."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psutil

NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")


def total_memory() -> int:
    """Bytes of RAM on this machine."""
    return psutil.virtual_memory().total


def machine_memory() -> int:
    """Bytes of memory a local worker may use here: distributed's ``MEMORY_LIMIT`` (RAM, cgroup and rlimit).

    distributed is imported on the first call (the first sidebar open), not with the server.
    """
    from distributed.system import MEMORY_LIMIT

    return MEMORY_LIMIT


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
