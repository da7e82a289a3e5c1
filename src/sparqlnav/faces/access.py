"""Who is asking, and by which name: the Host a request names (a DNS-rebinding page names its own domain,
so a server without a token answers only to loopback names and configured ones), and the client's address
behind reverse proxies (X-Forwarded-For is believed only when it comes from a configured proxy, since any
client can send one)."""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Iterable, Mapping

__all__ = [
    "HostCheck",
    "Networks",
    "client_address",
    "from_a_page",
    "host_name",
    "is_loopback",
    "presented_token",
]

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


def presented_token(authorization: str) -> str | None:
    """The token an Authorization header presents: a bearer token, or the password of Basic credentials (what a
    client that cannot set headers sends for a URL like http://any:TOKEN@host/…); None when it presents none."""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
        _, colon, password = decoded.partition(":")
        return password if colon else None
    return None


def from_a_page(headers: Mapping[bytes, bytes]) -> bool:
    """Whether a browser page may have sent this request without the server's consent (a "simple" request, which
    no CORS preflight asks about first: an <img>, a link, a form). Browsers name themselves (every current one's
    User-Agent starts with Mozilla/) and say where a request comes from (Sec-Fetch-Site, Origin); a page can set
    none of these. It cannot add X-Requested-With either without a preflight the server must allow."""
    if headers.get(b"x-requested-with"):
        return False
    if headers.get(b"sec-fetch-site", b"").lower() in (b"same-origin", b"none"):  # this server's own page, or typed
        return False
    browser = headers.get(b"user-agent", b"").startswith(b"Mozilla/")
    return browser or b"sec-fetch-site" in headers or b"origin" in headers
