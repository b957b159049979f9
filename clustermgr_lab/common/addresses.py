"""distributed's address parsing, imported on first use: the server imports no ``distributed`` until a cluster needs it.

``import distributed.comm.addressing`` runs ``distributed/__init__`` (and NumPy with it): about 19 MiB
of a server's private memory. These wrappers call distributed's own functions, so every address is
read exactly as distributed reads it.
"""

from __future__ import annotations


def parse_address(address: str, strict: bool = False) -> tuple[str, str]:
    """``"tls://host:port"`` -> ``("tls", "host:port")`` (:func:`distributed.comm.addressing.parse_address`)."""
    from distributed.comm.addressing import parse_address as parse

    return parse(address, strict)


def parse_host_port(address: str, default_port: int | None = None) -> tuple[str, int]:
    """``"host:port"`` -> ``("host", port)`` (:func:`distributed.comm.addressing.parse_host_port`)."""
    from distributed.comm.addressing import parse_host_port as parse

    return parse(address, default_port)


def unparse_host_port(host: str, port: int | None = None) -> str:
    """``("host", port)`` -> ``"host:port"``, IPv6 hosts bracketed (:func:`distributed.comm.addressing.unparse_host_port`)."""
    from distributed.comm.addressing import unparse_host_port as unparse

    return unparse(host, port)


def get_address_host(address: str) -> str:
    """The host of a full address (:func:`distributed.comm.addressing.get_address_host`)."""
    from distributed.comm.addressing import get_address_host as host_of

    return host_of(address)
