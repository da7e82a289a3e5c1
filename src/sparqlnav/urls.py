"""URLs as they may be shown: in names, descriptions, logs, `/api/info` and other processes' arguments, a URL's
password (`http://user:secret@host/…`, `?password=…`) is never repeated. The URL as given is still what connects."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["shown_url"]

_SECRET_PARAMS = frozenset({"password", "passwd", "pwd", "api_key", "apikey", "token", "access_token", "secret"})


def shown_url(url: str) -> str:
    """`url` without the password of its user information, and without query parameters that carry secrets."""
    try:
        parts = urlsplit(url)
        has_password = parts.password is not None
    except ValueError:  # not a URL we can read: show nothing of what might follow a user name
        return url.split("@", 1)[-1] if "@" in url else url
    netloc = parts.netloc
    if has_password:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in _SECRET_PARAMS for k, _ in pairs):
            query = urlencode([(k, "…" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs])
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
