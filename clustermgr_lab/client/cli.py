"""The ``clustermgr`` command: list, create, scale, adapt, delete and watch the clusters of a Jupyter server."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dask.utils import format_bytes

from clustermgr_lab.client.api import ClusterManagerClient
from clustermgr_lab.client.errors import (
    ClientError,
    ClusterFailedError,
    ClusterManagerAPIError,
    ServerNotFoundError,
    WaitTimeout,
)

EXIT_REFUSED, EXIT_USAGE, EXIT_NO_SERVER, EXIT_TIMEOUT = 1, 2, 3, 4

EPILOG = """\
The server is found the way `jupyter server list` finds it, unless --url/--token (or
JUPYTER_URL/JUPYTER_TOKEN) say where it is. A cluster is named by its id or its name.

exit codes: 0 done; 1 the server refused the request or the cluster failed; 2 bad usage;
3 no server found or reachable; 4 a wait timed out.
"""


# -- output ------------------------------------------------------------------------------------


def shown(text: Any) -> str:
    """``str(text)`` with control and other unprintable characters escaped: text from a server never drives the terminal.

    Examples
    --------
    >>> print(shown("\\x1b]0;title\\x07red\\r\\n"))
    \\x1b]0;title\\x07red\\r\\n
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Rows as left-aligned columns under their headers.

    Examples
    --------
    >>> print(table(["ID", "NAME"], [["a1", "first"], ["b22", "x"]]))
    ID   NAME
    a1   first
    b22  x
    """
    rows = [[shown(cell) for cell in row] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]
    )


def adapt_range(minimum: Any, maximum: Any, unit: str) -> str:
    """``"0-4 workers"``, or for memory ``"0 B-64.00 GiB"``.

    Examples
    --------
    >>> adapt_range(0, 4, "workers"), adapt_range(0, 2**30, "memory")
    ('0-4 workers', '0 B-1.00 GiB')
    """
    if unit == "memory" and isinstance(minimum, int) and isinstance(maximum, int):
        return f"{format_bytes(minimum)}-{format_bytes(maximum)}"
    return f"{minimum}-{maximum} {unit}"


def adapt_summary(adapt: Mapping[str, Any] | None) -> str:
    """``"default 0-4 workers"`` for each adaptive group of a cluster, or ``"-"``."""
    if not adapt:
        return "-"
    return ", ".join(f"{r['group']} {adapt_range(r['minimum'], r['maximum'], r['unit'])}" for r in adapt["groups"])


def label(cluster: Mapping[str, Any]) -> str:
    """``"name (id)"``."""
    return f"{cluster['name']} ({cluster['id']})"


def cluster_summary(cluster: Mapping[str, Any]) -> str:
    """One line: status, workers connected of requested, and what they add up to."""
    workers, resources = cluster["workers"], cluster["resources"]
    count = (
        f"{workers['running']} external"
        if cluster["backend"] == "external"
        else f"{workers['running']}/{workers['requested']}"
    )
    line = (
        f"{label(cluster)} {cluster['status']}: {count} workers, "
        f"{resources['cores']} cores, {format_bytes(resources['memory'])}"
    )
    if resources["gpus"]:
        line += f", {resources['gpus']} GPUs"
    if cluster["error"]:
        line += f"; error: {shown(cluster['error'])}"
    return line


def group_summary(group: Mapping[str, Any]) -> str:
    """``"default: 2 x (1 threads, 4.00 GiB)"``."""
    gpus = f", {group['gpus']} GPU" if group["gpus"] else ""
    return f"{group['name']}: {group['count']} x ({group['threads']} threads, {format_bytes(group['memory'])}{gpus})"


def local_time(iso: str) -> str:
    """An ISO 8601 time in this machine's time zone, to the second."""
    return datetime.datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def emit(args: argparse.Namespace, data: Any, human: Callable[[], str]) -> None:
    """Print ``data`` as JSON with ``--json``, else what ``human()`` makes of it."""
    print(json.dumps(data, indent=2) if args.json else human())


# -- commands ----------------------------------------------------------------------------------


def cmd_list(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr list`: the clusters, one a row."""
    clusters = client.list()
    rows = [
        [
            c["id"], c["name"], c["status"], f"{c['workers']['running']}/{c['workers']['requested']}",
            c["resources"]["cores"], format_bytes(c["resources"]["memory"]), adapt_summary(c["adapt"]), c["template"],
        ]
        for c in clusters
    ]  # fmt: skip
    headers = ["ID", "NAME", "STATUS", "WORKERS", "CORES", "MEMORY", "ADAPTIVE", "TEMPLATE"]
    emit(args, clusters, lambda: table(headers, rows) if rows else "no clusters")


def cmd_templates(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr templates`: what a new cluster can start from."""
    templates = client.templates()
    rows = [
        [t["name"], t["backend"], "; ".join(group_summary(g) for g in t["spec"]["groups"]),
         adapt_range(t["adapt"]["minimum"], t["adapt"]["maximum"], t["adapt"].get("unit", "workers")) if t["adapt"] else "-",
         t["description"]]
        for t in templates
    ]  # fmt: skip
    emit(args, templates, lambda: table(["NAME", "BACKEND", "WORKERS", "ADAPTIVE", "DESCRIPTION"], rows))


def _change(event: dict) -> str:
    """An event's change as the CHANGE column shows it: ``4 GiB: 2 -> 4``, ``1 -> 2``, or what was asked."""
    counts = f"{event['before']} -> {event['after']}" if event["kind"] == "scale" else ""
    asked = event.get("asked")
    return f"{asked}: {counts}" if asked and counts else asked or counts


def cmd_events(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr events CLUSTER`: its lifecycle and scaling events, oldest first."""
    events = client.events(client.find(args.cluster)["id"])
    rows = [
        [local_time(e["time"]), e["kind"], e["group"] or "-", _change(e),
         e["message"] + (f" (x{e['count']})" if e.get("count", 1) > 1 else "")]
        for e in events
    ]  # fmt: skip
    emit(args, events, lambda: table(["TIME", "KIND", "GROUP", "CHANGE", "MESSAGE"], rows))


def hours(seconds: float) -> str:
    """Seconds of use as hours, e.g. ``12.4``."""
    return f"{seconds / 3600:.1f}"


def cmd_usage(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr usage`: core-, GPU- and memory-hours per day and cluster (UTC days, newest first)."""
    days = client.usage(args.days)
    rows = []
    for day in days:
        rows.append([day["date"], "(all)", hours(day["core_seconds"]), hours(day["gpu_seconds"]),
                     format_bytes(day["memory_seconds"] / 3600)])  # fmt: skip
        for cluster in day["clusters"]:
            rows.append([
                "", f"{cluster['name']} ({cluster['id']})", hours(cluster["core_seconds"]),
                hours(cluster["gpu_seconds"]), format_bytes(cluster["memory_seconds"] / 3600),
            ])  # fmt: skip
    headers = ["DAY (UTC)", "CLUSTER", "CORE-HOURS", "GPU-HOURS", "MEMORY-HOURS"]
    emit(args, days, lambda: table(headers, rows))


def target(args: argparse.Namespace) -> dict[str, Any]:
    """The scale target the --workers/--cores/--memory options give (at most one)."""
    return {unit: getattr(args, unit) for unit in ("workers", "cores", "memory") if getattr(args, unit) is not None}


def option_value(text: str) -> tuple[str, Any]:
    """``NAME=VALUE``: the value as JSON when it is a number or true/false, else as text."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, not {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        return name, value
    return name, parsed if isinstance(parsed, (bool, int, float)) else value


def cmd_create(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr create`: a new cluster, sized by --workers/--cores/--memory if given."""
    cluster = client.create(
        template=args.template, name=args.name, idle_timeout=args.idle_timeout, options=dict(args.option) or None
    )
    size = target(args)
    if size:
        # The server resolves the size against the template's worker shape; a refused size
        # leaves no cluster behind.
        try:
            cluster = client.scale(cluster["id"], group=args.group, **size)
        except ClusterManagerAPIError:
            client.delete(cluster["id"], wait=True, timeout=args.timeout)
            raise
    if args.wait:
        cluster = client.wait(cluster["id"], "running", args.timeout)
    emit(args, cluster, lambda: f"created {cluster_summary(cluster)}")


def cmd_attach(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr attach ADDRESS`: list a cluster started elsewhere; it is observed, never scaled."""
    files = {"ca_file": args.tls_ca_file, "cert": args.tls_cert, "key": args.tls_key}
    tls = {k: str(Path(v).resolve()) for k, v in files.items() if v} or None
    cluster = client.attach(args.address, args.name, tls=tls, wait=args.wait, timeout=args.timeout)
    emit(args, cluster, lambda: f"attached {cluster_summary(cluster)}")


def cmd_scale(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr scale CLUSTER`: one group to a number of workers, cores or bytes."""
    cluster = client.scale(client.find(args.cluster)["id"], group=args.group, **target(args))
    r = cluster["resolved"]
    gpus = f", {r['gpus']} GPUs" if r["gpus"] else ""
    resolved = f"{r['workers']} workers, {r['cores']} cores, {format_bytes(r['memory'])}{gpus}"
    emit(args, cluster, lambda: f"{label(cluster)}: {r['group']} -> {resolved}")


def adapt_amount(text: str) -> int | str:
    """A whole number as an int; anything else (a size such as ``64GiB``) as the server should read it."""
    return int(text) if text.strip().isdigit() else text


def cmd_adapt(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr adapt CLUSTER`: adaptive mode on (--min/--max) or off (--off)."""
    cluster_id = client.find(args.cluster)["id"]
    if args.off:
        cluster = client.adapt(cluster_id, group=args.group)
    else:
        cluster = client.adapt(
            cluster_id, args.min, args.max, unit=args.unit, group=args.group,
            interval=args.interval, wait_count=args.wait_count,
        )  # fmt: skip
    state = adapt_summary(cluster["adapt"]) if cluster["adapt"] else "off"
    emit(args, cluster, lambda: f"{label(cluster)}: adaptive {state}")


def cmd_delete(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr delete CLUSTER`: stop it."""
    cluster = client.delete(client.find(args.cluster)["id"], wait=args.wait, timeout=args.timeout)
    done = "detached" if cluster["backend"] == "external" else "stopped and removed" if args.wait else "stopping"
    emit(args, cluster, lambda: f"{label(cluster)}: {done}")


def describe_message(message: Mapping[str, Any]) -> str:
    """One line per stream message (a snapshot gets one more per cluster)."""
    stamp = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
    head = f"{stamp} #{message['seq']} {message['type']:<8}"
    if message["type"] == "snapshot":
        lines = [f"{head} {len(message['clusters'])} clusters"]
        return "\n".join(lines + [f"  {cluster_summary(c)}" for c in message["clusters"]])
    if message["type"] == "removed":
        return f"{head} {message['id']}"
    return f"{head} {cluster_summary(message['cluster'])}"


def cmd_watch(client: ClusterManagerClient, args: argparse.Namespace) -> None:
    """`clustermgr watch`: every stream message as it comes, until --count or Ctrl-C."""
    for n, message in enumerate(client.watch(), start=1):
        print(json.dumps(message) if args.json else describe_message(message), flush=True)
        if n == args.count:
            return


# -- arguments ---------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_size_options(parser: argparse.ArgumentParser, required: bool) -> None:
    """--workers, --cores or --memory (one of them), and --group."""
    size = parser.add_mutually_exclusive_group(required=required)
    size.add_argument("--workers", type=int, help="number of workers")
    size.add_argument("--cores", type=int, help="number of cores (rounded up to whole workers)")
    size.add_argument("--memory", help="total memory, e.g. 64GiB or a byte count (rounded up to whole workers)")
    parser.add_argument("--group", help="the worker group (needed when the cluster has several)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; the global options are accepted before or after the command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help="the Jupyter server's URL, base URL included")
    common.add_argument("--token", default=argparse.SUPPRESS, help="the Jupyter server's token")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON, for scripts")

    parser = argparse.ArgumentParser(
        prog="clustermgr",
        description="Manage the Dask clusters of a running Jupyter server.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: Callable, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[common], help=help, description=help)
        sub.set_defaults(run=run)
        return sub

    command("list", cmd_list, "list the clusters")
    command("templates", cmd_templates, "list the templates a cluster can start from")

    create = command("create", cmd_create, "create a cluster from a template")
    create.add_argument("--template", help="the template (default: the server's default)")
    create.add_argument("--name", help="the cluster's name (default: Cluster N)")
    create.add_argument(
        "--option", action="append", default=[], type=option_value, metavar="NAME=VALUE",
        help="a user option of the template (repeatable), e.g. --option walltime=02:00:00 --option nice=5",
    )  # fmt: skip
    add_size_options(create, required=False)
    create.add_argument(
        "--idle-timeout", type=float, metavar="SECONDS",
        help="shut down after this long with no tasks and no client (default: the template's)",
    )  # fmt: skip
    create.add_argument("--wait", action="store_true", help="return once every worker has connected")
    create.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default: 120)")

    attach = command(
        "attach", cmd_attach, "list a running cluster started elsewhere (never scaled; delete detaches it)"
    )
    attach.add_argument("address", help="its scheduler's address, tcp://host:port (or tls://host:port)")
    attach.add_argument("--tls-ca-file", help="for a tls:// scheduler: the CA certificate its Client trusts")
    attach.add_argument("--tls-cert", help="for a tls:// scheduler: the certificate its Client presents")
    attach.add_argument("--tls-key", help="for a tls:// scheduler: that certificate's private key")
    attach.add_argument("--name", help="the name to list it under (default: Attached host:port)")
    attach.add_argument("--wait", action="store_true", help="return once its scheduler has been reached")
    attach.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default: 60)")

    scale = command("scale", cmd_scale, "scale a cluster to a number of workers, cores or bytes")
    scale.add_argument("cluster", help="id or name")
    add_size_options(scale, required=True)

    adapt = command("adapt", cmd_adapt, "turn adaptive mode on (or change its range) or off")
    adapt.add_argument("cluster", help="id or name")
    adapt.add_argument("--min", type=adapt_amount, help="smallest size, in --unit")
    adapt.add_argument("--max", type=adapt_amount, help="largest size, in --unit")
    adapt.add_argument("--unit", choices=["workers", "cores", "memory"], help="unit of --min/--max (default: workers)")
    adapt.add_argument("--group", help="the worker group (needed when the cluster has several)")
    adapt.add_argument("--interval", type=float, help="seconds between decisions")
    adapt.add_argument("--wait-count", type=positive_int, help="intervals a lower target must hold before shrinking")
    adapt.add_argument("--off", action="store_true", help="turn adaptive mode off (for --group only, if given)")

    delete = command("delete", cmd_delete, "stop a cluster (detach an attached one)")
    delete.add_argument("cluster", help="id or name")
    delete.add_argument("--wait", action="store_true", help="return once its processes are gone")
    delete.add_argument("--timeout", type=float, default=120.0, help="seconds --wait waits (default: 120)")

    events = command("events", cmd_events, "show a cluster's lifecycle and scaling events")
    events.add_argument("cluster", help="id or name")

    usage = command("usage", cmd_usage, "show core-, GPU- and memory-hours used per day, over all clusters")
    usage.add_argument("--days", type=positive_int, default=7, help="how many days back, today included (default: 7)")

    watch = command("watch", cmd_watch, "print every change as it happens (Ctrl-C stops)")
    watch.add_argument("--count", type=positive_int, help="stop after this many messages")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "adapt" and args.off == (args.min is not None or args.max is not None):
        parser.error("adapt: give --min and --max, or --off")
    args.json = getattr(args, "json", False)
    try:
        client = ClusterManagerClient(getattr(args, "url", None), getattr(args, "token", None))
        args.run(client, args)
    except (ClusterManagerAPIError, ClusterFailedError) as exc:
        return fail(exc, EXIT_REFUSED)
    except ServerNotFoundError as exc:
        return fail(exc, EXIT_NO_SERVER)
    except WaitTimeout as exc:
        return fail(exc, EXIT_TIMEOUT)
    except KeyboardInterrupt:
        return 130
    return 0


def fail(exc: ClientError, code: int) -> int:
    """Report an error on stderr; returns the exit code."""
    print(f"clustermgr: error: {shown(exc)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
