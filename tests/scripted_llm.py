"""A real OpenAI-compatible HTTP server for tests that replays a script of replies, errors and stalls."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Call:
    """A tool call in a scripted reply; `arguments` as a str is sent verbatim (e.g. broken JSON)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A chat completion: text and/or tool calls, with the usage numbers to report."""

    text: str | None = None
    tool_calls: tuple[Call, ...] | list[Call] = ()
    input_tokens: int = 10
    output_tokens: int = 5
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    model: str | None = None  # default: the model the request named


@dataclass(frozen=True)
class Error:
    """An HTTP error answer, e.g. Error(429, headers={"Retry-After": "0"})."""

    status: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Delay:
    """Wait `seconds`, then answer with `then`."""

    seconds: float
    then: Step


@dataclass(frozen=True)
class Hang:
    """Never answer; the connection is dropped when the server stops."""


@dataclass(frozen=True)
class Raw:
    """Send this exact body with this status (for malformed server answers)."""

    body: str
    status: int = 200
    content_type: str = "application/json"


Step = Reply | Error | Delay | Hang | Raw | Callable[[dict[str, Any]], "Step"]


def completion(body: dict[str, Any], reply: Reply, serial: int) -> dict[str, Any]:
    """The OpenAI chat.completion object for `reply` to the request `body`."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{serial}_{index}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments),
                },
            }
            for index, call in enumerate(reply.tool_calls)
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": f"chatcmpl-scripted-{serial}",
        "object": "chat.completion",
        "created": 0,
        "model": reply.model or body.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


class _Server(ThreadingHTTPServer):
    """The stdlib server with a listen backlog that takes a burst of clients (its default is 5)."""

    request_queue_size = 256
    daemon_threads = True


class ScriptedLLM:
    """OpenAI chat-completions server on 127.0.0.1 that answers each request with the next script step."""

    def __init__(self, model: str = "scripted-model") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []  # every chat-completions request body, in order
        self.headers: list[dict[str, str]] = []  # the headers of those requests
        self.problems: list[str] = []  # requests the script could not answer
        self._served = 0  # chat requests answered (replies and errors; not hangs or dropped ones)
        self._steps: list[Step] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._serial = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (ends in /v1)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, steps: Iterable[Step]) -> ScriptedLLM:
        """Queue steps; each chat request consumes one."""
        with self._lock:
            self._steps.extend(steps)
        return self

    @property
    def served(self) -> int:
        """Chat requests the server answered, errors included (a Hang, or a Delay cut short, is not)."""
        with self._lock:
            return self._served

    def _count_served(self) -> None:
        with self._lock:
            self._served += 1

    @property
    def remaining(self) -> int:
        """Steps not yet consumed."""
        with self._lock:
            return len(self._steps)

    def start(self) -> ScriptedLLM:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging requests and shut down."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling

    def _next_step(self, body: dict[str, Any]) -> tuple[Step | None, int]:
        with self._lock:
            self.requests.append(body)
            serial = next(self._serial)
            step = self._steps.pop(0) if self._steps else None
        return step, serial

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                return

            def _send(
                self,
                status: int,
                payload: str,
                headers: dict[str, str] | None = None,
                content_type: str = "application/json",
            ) -> None:
                data = payload.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _error(
                self, status: int, message: str, headers: dict[str, str] | None = None
            ) -> None:
                payload = {"error": {"message": message, "type": "scripted", "code": str(status)}}
                self._send(status, json.dumps(payload), headers)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    data = [
                        {
                            "id": server.model,
                            "object": "model",
                            "created": 0,
                            "owned_by": "scripted",
                        }
                    ]
                    self._send(200, json.dumps({"object": "list", "data": data}))
                else:
                    self._error(404, f"no route {self.path}")

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._error(404, f"no route {self.path}")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError as exc:
                    self._error(400, f"request body is not JSON: {exc}")
                    return
                with server._lock:
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                step, serial = server._next_step(body)
                self._answer(body, step, serial)

            def _answer(self, body: dict[str, Any], step: Step | None, serial: int) -> None:
                while callable(step):  # a function of the request computes the step
                    step = step(body)
                if not isinstance(step, Delay | Hang):
                    server._count_served()  # before the answer leaves, so a client never sees it first
                if step is None:
                    server.problems.append(f"request {serial}: script exhausted")
                    self._error(500, "scripted_llm: script exhausted")
                elif isinstance(step, Reply):
                    self._send(200, json.dumps(completion(body, step, serial)))
                elif isinstance(step, Error):
                    self._error(step.status, step.message, step.headers)
                elif isinstance(step, Raw):
                    self._send(step.status, step.body, content_type=step.content_type)
                elif isinstance(step, Delay):
                    if server._stopping.wait(step.seconds):
                        return
                    self._answer(body, step.then, serial)
                elif isinstance(step, Hang):
                    server._stopping.wait()
                    self.close_connection = True
                else:
                    server.problems.append(f"request {serial}: unknown step {step!r}")
                    self._error(500, "scripted_llm: unknown step")

        return Handler
