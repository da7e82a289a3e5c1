"""Which redirects an HTTP client follows: within the origin (scheme, host and port) of the URL it was given, or to
an origin configured as allowed, and never from https to anything else. A redirect elsewhere would re-send what the
request carries (a whole prompt, the endpoint's `SPARQLNAV_HEADERS`) to a machine nobody chose.

`OriginGuard` is a request hook: httpx calls it before every request a client sends, each redirect's included, and
it raises `OffOrigin` before a request leaves for an origin outside these.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from sparqlnav.errors import SparqlnavError

__all__ = ["OffOrigin", "Origin", "OriginGuard", "origin", "origin_text"]

Origin = tuple[str, str, int]  # scheme, host, port
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NOWHERE: Origin = ("", "", 0)


def origin(url: str) -> Origin:
    """A URL's origin: scheme and host in lower case, and its port (the scheme's default when none is written);
    ValueError when it names none (no host, a scheme other than http(s), a malformed port)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port or _DEFAULT_PORTS.get(scheme)  # .port raises ValueError for a malformed one
    if not host or scheme not in _DEFAULT_PORTS or port is None:
        raise ValueError(f"{url[:100]!r} names no http(s) origin")
    return scheme, host, port


def origin_text(where: Origin) -> str:
    """An origin as a URL prefix (`https://host`, `http://host:8080`)."""
    scheme, host, port = where
    if not scheme:
        return "a URL that names no http(s) origin"
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if _DEFAULT_PORTS.get(scheme) == port else f":{port}")


class OffOrigin(SparqlnavError):
    """A redirect the client may not follow, refused before any request is sent there; the message says why."""


class OriginGuard:
    """A request hook letting requests go to `home`'s origin and to the `allowed` ones only (never https → http).

    `what` names the server in messages; `hint` ends the refusal (say, which setting allows more)."""

    def __init__(self, home: str, allowed: Iterable[str] = (), *, what: str = "the server", hint: str = "") -> None:
        self.home = origin(home)
        self.allowed = frozenset(origin(url) for url in allowed)
        self.what = what
        self.hint = hint

    def __call__(self, request: Any) -> None:
        """Raise OffOrigin unless `request` (an httpx or httpx2 Request) goes where this guard lets it."""
        try:
            target = origin(str(request.url))
        except ValueError:
            target = _NOWHERE
        if target == self.home:
            return
        if self.home[0] == "https" and target[0] != "https":
            raise OffOrigin(
                f"{self.what} redirected from https to {origin_text(target)}; a redirect never leaves https, so it "
                "was not followed"
            )
        if target in self.allowed:
            return
        raise OffOrigin(
            f"{self.what} redirected to another origin ({origin_text(target)}); only redirects within "
            f"{origin_text(self.home)} are followed{self.hint}"
        )
