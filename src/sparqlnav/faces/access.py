"""Who is asking, and by which name: the Host a request names (a DNS-rebinding page names its own domain,
so a server without a token answers only to loopback names and configured ones), and the client's address
behind reverse proxies (X-Forwarded-For is believed only when it comes from a configured proxy, since any
client can send one)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

__all__ = ["HostCheck", "Networks", "client_address", "host_name", "is_loopback"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})  # listening everywhere names no host


def host_name(header: str) -> str | None:
    """The host name of a Host header (`name`, `name:port`, `[v6]:port`), lower-cased without a trailing dot;
    None when the header is malformed."""
    value = header.strip().lower()
    if value.startswith("["):
        name, closed, rest = value[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    else:
        name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


def is_loopback(name: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostCheck:
    """The Host names a server answers to: loopback ones, the address it listens on and configured names."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.allowed = frozenset(
            n for n in (host_name(a) for a in allowed if a not in WILDCARD_BINDS) if n is not None
        )

    def allows(self, header: str | None) -> bool:
        """Whether a request naming this Host header (None: none sent) may be answered."""
        name = host_name(header) if header else None
        return name is not None and (is_loopback(name) or name in self.allowed)


class Networks:
    """A set of addresses and networks (the trusted proxies)."""

    def __init__(self, items: Iterable[str] = ()) -> None:
        self.items: tuple[Network, ...] = tuple(ipaddress.ip_network(i, strict=False) for i in items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __contains__(self, address: object) -> bool:
        try:
            ip = ipaddress.ip_address(str(address))
        except ValueError:
            return False
        return any(ip.version == n.version and ip in n for n in self.items)


def client_address(peer: str, forwarded_for: str | None, trusted: Networks) -> str:
    """The client a request comes from: its peer address, or, while the peer is a trusted proxy, the hop that
    proxy reports (X-Forwarded-For read from the right, the end each proxy appends to)."""
    client = peer
    hops = [h.strip() for h in (forwarded_for or "").split(",") if h.strip()]
    for hop in reversed(hops):
        if client not in trusted:
            break
        try:
            client = str(ipaddress.ip_address(hop))
        except ValueError:
            break  # not an address: keep the proxy that passed it on as the client
    return client
