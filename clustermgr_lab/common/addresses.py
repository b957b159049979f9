"""Dask addresses (``"tls://host:port"``) read exactly as distributed reads them, without importing distributed.

``import distributed.comm.addressing`` runs ``distributed/__init__`` (and NumPy with it): about 19 MiB of a
server's private memory, kept for the server's life. The server reads addresses where it speaks to no
scheduler at all (a kernel's announcement in the discovery folder, the kernel dashboard link, the
``/proxy/`` confinement), so these functions follow :mod:`distributed.comm.addressing` rule for rule in
plain Python for the schemes whose location is ``host:port`` (:data:`HOST_PORT_SCHEMES`); an address of
any other scheme (``inproc://``, ``ucx://``, a plugin's) is handed to distributed's own functions.
``tests/test_addresses.py`` checks each function against distributed's on the same inputs, errors included.

Examples
--------
>>> parse_address("tls://10.0.0.5:8786")
('tls', '10.0.0.5:8786')
>>> parse_host_port("[::1]:8786")
('::1', 8786)
>>> unparse_host_port("::1", 8786)
'[::1]:8786'
>>> get_address_host("tcp://node7:8786")
'node7'
"""

from __future__ import annotations

import dask.config

#: Schemes whose location is ``host:port``: distributed's TCP, TLS and WebSocket backends (``BaseTCPBackend``).
HOST_PORT_SCHEMES = frozenset({"tcp", "tls", "ws", "wss"})

#: ``distributed.comm.default-scheme`` when neither the site nor the user set it (distributed.yaml's value).
DEFAULT_SCHEME = "tcp"


def default_scheme() -> str:
    """The scheme of an address written without one: the dask config's ``distributed.comm.default-scheme``."""
    return dask.config.get("distributed.comm.default-scheme", DEFAULT_SCHEME)


def parse_address(address: str, strict: bool = False) -> tuple[str, str]:
    """``"tls://host:port"`` -> ``("tls", "host:port")``, as :func:`distributed.comm.addressing.parse_address`.

    Parameters
    ----------
    address
        The address; without ``scheme://`` it takes :func:`default_scheme`.
    strict
        Raise :class:`ValueError` for an address without a scheme instead.
    """
    if not isinstance(address, str):
        raise TypeError(f"expected str, got {address.__class__.__name__!r}")
    scheme, separator, location = address.rpartition("://")
    if not separator:
        if strict:
            raise ValueError(f"Invalid url scheme. Must include protocol like tcp://localhost:8000. Got {address}")
        scheme = default_scheme()
    return scheme, location


def parse_host_port(address: str | tuple[str, int], default_port: str | int | None = None) -> tuple[str, int]:
    """``"host:port"`` -> ``("host", port)``, as :func:`distributed.comm.addressing.parse_host_port`.

    IPv6 hosts are written in brackets (``"[::1]:8786"``); a ``scheme://`` in front is dropped; without a
    port, ``default_port`` is taken, or :class:`ValueError` raised when there is none.
    """
    if isinstance(address, tuple):
        return address
    text = address
    if "://" in text:
        _, text = text.split("://")  # two of them raise ValueError, as in distributed
    if text.startswith("["):
        host, closed, tail = text[1:].partition("]")
        if not closed or (tail and not tail.startswith(":")):
            raise ValueError(f"invalid address {text!r}; maybe: ipv6 needs brackets like [::1]")
        port = tail[1:] if tail else None
    else:
        host, separator, port = text.rpartition(":")
        if not separator:
            host, port = port, None
        elif ":" in host:
            raise ValueError(f"invalid address {text!r}; maybe: ipv6 needs brackets like [::1]")
    if port is None:
        if default_port is None:
            raise ValueError(f"missing port number in address {text!r}")
        port = default_port
    return host, int(port)


def unparse_host_port(host: str, port: int | None = None) -> str:
    """``("host", port)`` -> ``"host:port"``, an IPv6 host bracketed, as :func:`distributed.comm.addressing.unparse_host_port`."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return host if port is None else f"{host}:{port}"


def get_address_host(address: str) -> str:
    """The host of a full address, as :func:`distributed.comm.addressing.get_address_host`.

    An address of a scheme outside :data:`HOST_PORT_SCHEMES` is read by distributed itself (imported then).
    """
    scheme, location = parse_address(address)
    if scheme in HOST_PORT_SCHEMES:
        return parse_host_port(location)[0]
    from distributed.comm.addressing import get_address_host as host_of

    return host_of(address)
