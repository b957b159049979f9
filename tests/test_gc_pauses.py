"""Given a real Jupyter server with the extension, the objects alive at its start are left out of full collections."""

import asyncio
import gc

import pytest


@pytest.fixture
def unfrozen():
    """No object frozen before the server starts (an earlier test's server may have frozen some), none after."""
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.fixture
def jp_server_config(jp_server_config, request):
    if "keep_collector" in request.fixturenames:
        jp_server_config["ClusterManager"]["freeze_startup_objects"] = False
    return jp_server_config


@pytest.fixture
def keep_collector():
    """The server is configured with ``freeze_startup_objects = False`` (see ``jp_server_config``)."""


async def test_objects_alive_at_start_are_frozen(unfrozen, jp_serverapp):
    # Given a server that has started (the freeze waits for the event loop's first turn)
    await asyncio.sleep(0.1)
    # Then what was alive then is out of full collections: the modules, the server and the extension among them
    assert gc.get_freeze_count() > 10_000


async def test_the_freeze_can_be_turned_off(keep_collector, unfrozen, jp_serverapp):
    # Given a server configured with freeze_startup_objects = False
    await asyncio.sleep(0.1)
    # Then nothing is frozen
    assert gc.get_freeze_count() == 0
