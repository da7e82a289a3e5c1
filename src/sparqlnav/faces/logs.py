"""Log lines for people on a terminal: time, level, message and the record's fields as key=value."""

from __future__ import annotations

import logging
import time
from enum import StrEnum

from sparqlnav.faces.output import terminal_safe


def printable(text: str) -> str:
    """`text` as one line a terminal shows as it is: newlines, ESC and bidi controls written as escapes."""
    return terminal_safe(text, lines=False)


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
