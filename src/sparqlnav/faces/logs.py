"""Log lines for people on a terminal: time, level, message and the record's fields as key=value."""

from __future__ import annotations

import logging
import re
import time
from enum import StrEnum

# What a terminal would act on rather than show: control characters (a newline forges a log line, ESC moves the
# cursor or clears the screen) and the bidirectional controls that reorder what follows (U+202E).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every character a terminal would act on written as an escape (`\\n`, `\\x1b`, `\\u202e`)."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class LogFormat(StrEnum):
    """How `serve` writes its logs."""

    auto = "auto"  # text on a terminal, JSON lines otherwise
    text = "text"
    json = "json"


class ReadableFormatter(logging.Formatter):
    """`12:04:05 info  request method=POST path=/api/ask status=200 …`: one short line per record."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record."""
        fields = getattr(record, "fields", None) or {}
        # Request paths and other fields come from clients: escaped, so no one writes lines or codes into the log.
        extra = " ".join(f"{k}={printable(str(v))}" for k, v in fields.items() if v is not None and v != "")
        line = f"{time.strftime('%H:%M:%S', time.localtime(record.created))} {record.levelname.lower():<7} {printable(record.getMessage())}"
        line += f"  {extra}" if extra else ""
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def readable(chosen: LogFormat, on_terminal: bool) -> bool:
    """Whether logs are for people: `text`, or `auto` on a terminal (JSON lines otherwise)."""
    return chosen is LogFormat.text or (chosen is LogFormat.auto and on_terminal)
