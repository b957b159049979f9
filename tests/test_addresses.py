"""Given an address string, the server reads it exactly as distributed does, without importing distributed.

Each function of ``clustermgr_lab.common.addresses`` is called beside distributed's own on the same inputs:
the same answer, or the same exception type and message.
"""

from __future__ import annotations

import subprocess
import sys

import dask.config
import pytest
from distributed.comm import addressing

from clustermgr_lab.common import addresses

ADDRESSES = [
    "tcp://127.0.0.1:8786",
    "tls://10.250.0.11:40123",
    "ws://node7:8786",
    "wss://[::1]:443",
    "tcp://[fe80::1%eth0]:9000",
    "tls://[::1]",
    "tcp://localhost",
    "127.0.0.1:8786",
    "[::1]:8786",
    "node7",
    "::1",
    "tcp://::1:8786",
    "tcp://[::1",
    "tcp://[::1]x",
    "tcp://host:port",
    "tcp://a://b:1",
    "",
    ":8786",
    "tcp://:0",
    "inproc://10.0.0.1/123/4",
]


def outcome(function, *args):
    """What a call gives: ("ok", value) or ("raised", exception type, message)."""
    try:
        return ("ok", function(*args))
    except Exception as error:  # noqa: BLE001 - the exception is the answer compared
        return ("raised", type(error), str(error))


@pytest.mark.parametrize("address", ADDRESSES)
@pytest.mark.parametrize("strict", [False, True])
def test_parse_address_answers_as_distributed(address, strict):
    # When both read the address, strict or not
    ours = outcome(addresses.parse_address, address, strict)
    # Then they agree, errors included
    assert ours == outcome(addressing.parse_address, address, strict)


@pytest.mark.parametrize("address", ADDRESSES)
@pytest.mark.parametrize("default_port", [None, 8786, "8787"])
def test_parse_host_port_answers_as_distributed(address, default_port):
    ours = outcome(addresses.parse_host_port, address, default_port)
    assert ours == outcome(addressing.parse_host_port, address, default_port)


@pytest.mark.parametrize("host", ["127.0.0.1", "node7", "::1", "[::1]", "fe80::1%eth0", ""])
@pytest.mark.parametrize("port", [None, 0, 8786])
def test_unparse_host_port_answers_as_distributed(host, port):
    assert addresses.unparse_host_port(host, port) == addressing.unparse_host_port(host, port)


@pytest.mark.parametrize("address", [a for a in ADDRESSES if "inproc" not in a])
def test_get_address_host_answers_as_distributed(address):
    assert outcome(addresses.get_address_host, address) == outcome(addressing.get_address_host, address)


def test_an_address_without_scheme_takes_the_configured_default():
    # Given a site that set distributed.comm.default-scheme
    with dask.config.set({"distributed.comm.default-scheme": "tls"}):
        # Then both read a bare address with it
        assert addresses.parse_address("10.0.0.5:8786") == ("tls", "10.0.0.5:8786")
        assert addressing.parse_address("10.0.0.5:8786") == ("tls", "10.0.0.5:8786")


def test_a_non_string_address_is_refused_as_distributed_refuses_it():
    ours = outcome(addresses.parse_address, 8786)
    assert ours[:2] == ("raised", TypeError)
    assert ours == outcome(addressing.parse_address, 8786)


READ_WHERE_THE_SERVER_READS = """
import sys
from types import SimpleNamespace as NS
from clustermgr_lab.common import addresses as a
from clustermgr_lab.foreign.announcements import check_address
from clustermgr_lab.web.generic_proxy import cluster_ports
from clustermgr_lab.web.kernel_dashboard_link import get_address_host
a.parse_address('tls://[::1]:1'); a.parse_host_port('h:1'); a.unparse_host_port('::1', 2)
assert check_address('tcp://127.0.0.1:8786', set()) == 'tcp://127.0.0.1:8786'
endpoint = NS(address='tls://127.0.0.1:8786', dashboard_address='127.0.0.1:8787')
assert cluster_ports([NS(endpoint=endpoint)]) == {8786: {'127.0.0.1'}, 8787: {'127.0.0.1'}}
assert get_address_host('wss://node7:8786') == 'node7'
print(sorted(m for m in sys.modules if m.split('.')[0] in ('distributed', 'numpy')))
"""


def test_reading_addresses_imports_no_distributed():
    # Given a fresh interpreter that reads addresses where the server reads them: a kernel's announcement in the
    # discovery folder, the /proxy/ confinement to clusters' ports, the kernel dashboard link
    code = READ_WHERE_THE_SERVER_READS
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr[-3000:]
    # Then neither distributed nor NumPy was imported
    assert found.stdout.strip() == "[]", found.stdout
