"""The client's address: the socket peer, or — only when that peer is a trusted proxy — the
nearest untrusted hop of X-Forwarded-For (anyone can send the header; only our proxies'
word counts)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import Scope

from streamtts.gateway.networks import Address, Network, contains


def _parse(text: str) -> Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def client_address(scope: Scope, trusted: Sequence[Network]) -> Address | None:
    """None when the peer is not an IP address (a Unix socket) or a trusted proxy sent an
    unparseable hop (treated as unknown: it matches no allowlist)."""
    client = scope.get("client")
    peer = _parse(client[0]) if client else None
    if peer is None or not trusted or not any(contains(n, peer) for n in trusted):
        return peer
    forwarded: list[str] = []
    for name, value in scope.get("headers", ()):
        if name == b"x-forwarded-for":
            forwarded += value.decode("latin-1").split(",")
    # Right to left: each trusted hop vouches for the one before it; the first untrusted
    # address is the client (the leftmost entries are whatever the client wrote).
    for hop in reversed(forwarded):
        addr = _parse(hop)
        if addr is None:
            return None
        if not any(contains(n, addr) for n in trusted):
            return addr
    return peer if not forwarded else _parse(forwarded[0])
