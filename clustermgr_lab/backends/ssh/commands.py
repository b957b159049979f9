"""The shell commands run on a worker's host over SSH: report, signal and kill its process group.

A worker is a ``python -m distributed.cli.dask_spec`` Nanny that sshd starts in a session (a process
group) of its own; its Nanny prints that group as it starts (:data:`REPORT_PROCESS_GROUP`, a Nanny
preload). Stopping it is ``kill -TERM`` (then ``-KILL``) of the group: OpenSSH refuses SSH's own signal
requests for root logins. Every command is for ``sh -c``, whatever the remote user's login shell is.

>>> reported_process_group(["Worker at tcp://10.0.0.6:4001", f"{PROCESS_GROUP_MARK} 4242"])
4242
>>> _literal_pattern("tls://10.0.0.5:8786")
'tls://10[.]0[.]0[.]5:8786'
"""

from __future__ import annotations

import re

PROCESS_GROUP_MARK = "clustermgr-lab remote process group"
#: Runs in the remote Nanny as it starts (distributed runs preload text as a script). No single quote:
#: distributed.deploy.ssh puts the worker's options in single quotes on the remote command line.
REPORT_PROCESS_GROUP = f'import os, sys; print("{PROCESS_GROUP_MARK}", os.getpgid(0), file=sys.stderr, flush=True)'


def reported_process_group(output: list[str]) -> int | None:
    """The process group a starting worker printed (see :data:`REPORT_PROCESS_GROUP`), if it did."""
    for line in output:
        match = re.search(re.escape(PROCESS_GROUP_MARK) + r" (\d+)", line)
        if match:
            return int(match.group(1))
    return None


def stop_group_command(process_group: int, signal_name: str, wait: float) -> str:
    """Signal a worker's process group, then wait up to ``wait`` seconds for all of it to end (exit 0) or not (1)."""
    group, steps = int(process_group), int(wait * 10)
    script = (
        f"kill -{signal_name} -{group} 2>/dev/null; i=0; "
        f"while kill -0 -{group} 2>/dev/null; do [ $i -ge {steps} ] && exit 1; sleep 0.1; i=$((i+1)); done"
    )
    return f"sh -c '{script}'"  # dash's kill takes no "--"


def _wait_until_gone(groups: str) -> str:
    """sh: wait (10 s at most) until the process groups ``groups`` (words) are gone, so that the caller can count on it."""
    return f"i=0; for g in {groups}; do while kill -0 -$g 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; done"


def kill_group_command(process_group: int) -> str:
    """Kill a worker's process group on its host, only if its leader still is a dask_spec process."""
    group = int(process_group)
    wait = _wait_until_gone(str(group))
    return f"sh -c 'ps -o args= -p {group} | grep -q distributed.cli.dask_spec && kill -KILL -{group} && {{ {wait}; }}'"


def _literal_pattern(text: str) -> str:
    """``text`` as an extended regular expression that matches it literally, safe inside sh's double quotes."""
    return "".join(c if c.isalnum() or c in "/:_-@" else f"[{c}]" for c in text)


def kill_unreported_command(scheduler_address: str, name: str) -> str:
    """Kill the process groups of worker ``name`` of ``scheduler_address`` found by command line, then wait for them.

    For a worker whose start was given up before its Nanny reported its process group. The remote command line
    is ``... distributed.cli.dask_spec <scheduler> --spec '{..."name": "<name>"...}'``, and sshd starts each
    command in a session (a process group) of its own. ``[.]`` keeps the pattern from matching this command itself.
    """
    address, worker = _literal_pattern(scheduler_address), _literal_pattern(name)
    pattern = f"distributed[.]cli[.]dask_spec {address} .*name.: .{worker}[^A-Za-z0-9_.-]"
    kill = (
        f'gs=""; for p in $(pgrep -f "{pattern}"); do g=$(ps -o pgid= -p $p | tr -d " "); '
        '[ -n "$g" ] && kill -KILL -$g && gs="$gs $g"; done'
    )
    return f"sh -c '{kill}; {_wait_until_gone('$gs')}; true'"
