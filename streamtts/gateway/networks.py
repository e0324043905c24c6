"""Client networks: the IP address and CIDR types of allowlists and trusted proxies."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from streamtts.errors import ConfigError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def contains(network: Network, address: Address) -> bool:
    if network.version != address.version:
        # An IPv4 client on a dual-stack socket appears as ::ffff:a.b.c.d.
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        return mapped is not None and mapped in network
    return address in network


def parse_networks(values: Iterable[Any], where: str) -> tuple[Network, ...]:
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            raise ConfigError(f"{where}: {value!r} is not an IP address or CIDR network") from None
    return tuple(out)
