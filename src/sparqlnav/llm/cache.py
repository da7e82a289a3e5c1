"""The reply cache: one JSON file per request on disk, keyed by the request's hash; writes are atomic."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparqlnav.llm.messages import LLMReply

# Part of every key: a change of what a cached entry means starts a fresh cache.
CACHE_FORMAT = 1


class ReplyCache:
    """Replies on disk, one JSON file per request hash; writes are atomic."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @staticmethod
    def key(body: Mapping[str, Any]) -> str:
        """The hash of a request body, the name of its entry."""
        canonical = json.dumps(
            {"format": CACHE_FORMAT, "request": body},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> LLMReply | None:
        """The stored reply, or None (a damaged entry is a miss too)."""
        path = self._path(key)
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            return LLMReply.model_validate(stored["reply"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is a miss; the next write replaces it

    def put(self, key: str, body: Mapping[str, Any], reply: LLMReply) -> None:
        """Store `reply` for the request `body`, all or nothing."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(
            {"request": body, "reply": reply.model_dump(mode="json")}, ensure_ascii=False, indent=1
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(payload)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

