"""JSON as models write it: lenient decoding, tool-call arguments, the first object in a reply, a schema check."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from sparqlnav.llm.errors import LLMOutputError, one_line
from sparqlnav.llm.messages import M

# Models often put raw newlines inside JSON strings (multi-line SPARQL); strict=False accepts them.
LENIENT_JSON = json.JSONDecoder(strict=False)


def json_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments written as a JSON object, and why they cannot be read (None when they can)."""
    if not raw.strip():
        return {}, None
    try:
        value = LENIENT_JSON.decode(raw)
    except json.JSONDecodeError as exc:
        return (
            {},
            f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        )
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None



def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (whole text, fenced block or embedded), or None."""
    stripped = text.strip()
    try:
        whole = LENIENT_JSON.decode(stripped)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return whole
    decoder = LENIENT_JSON
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def validate_json(text: str, schema: type[M]) -> M:
    """The first JSON object of `text` as `schema`; LLMOutputError says in one line why it is not."""
    obj = extract_json_object(text)
    preview = one_line(text)[:80]
    if obj is None:
        raise LLMOutputError(f"expected a JSON object for {schema.__name__}, got: {preview!r}")
    try:
        return schema.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise LLMOutputError(
            f"JSON reply does not match {schema.__name__}: {where}: {first.get('msg')}{more}"
        ) from exc

