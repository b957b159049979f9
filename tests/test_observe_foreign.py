"""Given a notebook's own LocalCluster that this server discovered, when the user scales and adapts it, then it works as if
no server were watching: no plugin replaced, no warning in the user's output, ``scheduler_info`` up to date."""

from __future__ import annotations

import asyncio
import time

from .helpers import until
from .test_discovery import listed, run_in_kernel, scheduler_address

OWN_CLUSTER = (
    "from distributed import LocalCluster\n"
    "cluster = LocalCluster(n_workers=0, threads_per_worker=1, processes=False, protocol='tcp', host='127.0.0.1',"
    " dashboard_address='127.0.0.1:0')\n"
    "print(cluster.scheduler_address)"
)


async def test_a_discovered_local_cluster_keeps_its_own_worker_stream(jp_fetch, jp_serverapp):
    # Given a kernel of this server whose notebook started its own LocalCluster, listed by the server
    kernel_id = await jp_serverapp.kernel_manager.start_kernel(kernel_name="python3")
    client = jp_serverapp.kernel_manager.get_kernel(kernel_id).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=120)
        address = scheduler_address(await run_in_kernel(client, OWN_CLUSTER))
        await until(lambda: _running(jp_fetch, address), 60, "listed and running")
        # the server observes it for a while (several polls), as it would while the notebook is open
        observed_since = time.monotonic()
        while time.monotonic() - observed_since < 3:
            await asyncio.sleep(0.5)
            assert (await listed(jp_fetch, address))["status"] == "running"

        # When the user scales it and waits for the workers, as a notebook does
        output = await run_in_kernel(
            client,
            "cluster.scale(2)\n"
            "cluster.wait_for_workers(2, timeout=60)\n"
            "import time\n"
            "deadline = time.monotonic() + 30\n"
            "while len(cluster.scheduler_info['workers']) != 2 and time.monotonic() < deadline:\n"
            "    time.sleep(0.05)\n"
            "print('workers seen by the cluster object:', len(cluster.scheduler_info['workers']))",
        )
        # Then its own Cluster object sees both workers, and nothing was printed about a replaced plugin
        assert "workers seen by the cluster object: 2" in output, output
        assert "overwriting" not in output and "already contains a plugin" not in output, output
        # And the server lists both workers too
        await until(lambda: _running_workers(jp_fetch, address, 2), 30, "listed with 2 workers")

        # When the user turns on distributed's own adaptive mode with a floor of 3 workers
        output = await run_in_kernel(
            client,
            "adaptive = cluster.adapt(minimum=3, maximum=3, interval='100ms')\n"
            "deadline = time.monotonic() + 60\n"
            "while len(cluster.scheduler_info['workers']) != 3 and time.monotonic() < deadline:\n"
            "    time.sleep(0.05)\n"
            "print('workers after adapt:', len(cluster.scheduler_info['workers']))\n"
            "plugins = sorted(cluster.scheduler.plugins)\n"
            "print('plugins:', plugins)",
        )
        # Then it reaches 3 workers, and the scheduler holds no plugin of this server's
        assert "workers after adapt: 3" in output, output
        assert "overwriting" not in output, output
        plugins = output.split("plugins:", 1)[1]
        assert "clustermgr" not in plugins, plugins
        await until(lambda: _running_workers(jp_fetch, address, 3), 30, "listed with 3 workers")
    finally:
        client.stop_channels()
        await jp_serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)


async def _running(jp_fetch, address: str) -> bool:
    cluster = await listed(jp_fetch, address)
    return cluster is not None and cluster["status"] == "running"


async def _running_workers(jp_fetch, address: str, n: int) -> bool:
    cluster = await listed(jp_fetch, address)
    return cluster is not None and cluster["workers"]["running"] == n


async def test_a_busy_schedulers_identity_is_read_whole_though_its_metrics_are_keyed_by_tuples():
    """A worker that ran tasks since its last heartbeat reports ``digests_total_since_heartbeat`` keyed by
    ``("execute", prefix, ...)`` tuples: msgpack map keys that are arrays. Read as lists they are unhashable,
    and the discovered cluster of a notebook that computed was marked failed with "not msgpack"."""
    from distributed import Client, LocalCluster

    from clustermgr_lab.foreign.scheduler import ForeignComm, foreign_identity

    def tuple_keyed(identity) -> bool:
        return any(
            isinstance(key, tuple)
            for worker in identity["workers"].values()
            for key in (worker.get("metrics") or {}).get("digests_total_since_heartbeat", {})
        )

    # Given a LocalCluster whose workers are busy with a burst of tasks
    async with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
        dashboard_address="127.0.0.1:0", asynchronous=True,
    ) as cluster, Client(cluster, asynchronous=True) as client:  # fmt: skip
        futures = client.map(lambda i: time.sleep(0.05) or i, range(400))
        comm = ForeignComm(cluster.scheduler_address)
        try:
            # When the server's line reads its identity while they report tuple-keyed metrics
            async def tuple_keys_seen():
                return tuple_keyed(await comm.call("identity", n_workers=16))

            await until(tuple_keys_seen, 60, "an identity with tuple-keyed worker metrics")
        finally:
            await comm.close()
        # Then it was decoded whole, and the checked identity is accepted
        assert (await foreign_identity(cluster.scheduler_address)).workers
        await client.cancel(futures)
