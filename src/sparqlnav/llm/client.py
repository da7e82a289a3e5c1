"""OpenAI-compatible chat client: native or text-ReAct tool calls, structured output, retries, cache, budgets."""

from __future__ import annotations

import ast
import errno
import hashlib
import json
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from sparqlnav.errors import SparqlnavError
from sparqlnav.retry import GaveUp, Retryable, RetryPolicy, retry_after, with_retries
from sparqlnav.transport import TOO_LARGE, Deadline, guarded_transport, sdk_http

if TYPE_CHECKING:
    import openai  # imported when a client is made: it takes a second, and many runs need no LLM

    from sparqlnav.trace import Trace

__all__ = [
    "Budget",
    "BudgetExceeded",
    "CallOutcome",
    "CallRecord",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMOutputError",
    "LLMReply",
    "LLMUsage",
    "Message",
    "ModelPrice",
    "Recorder",
    "StructuredReply",
    "ToolCall",
    "ToolSpec",
    "UsageTotals",
    "extract_json_object",
    "load_prices",
    "parse_react",
    "trace_recorder",
]

ToolMode = Literal["native", "react"]
Role = Literal["system", "user", "assistant", "tool"]
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

# Statuses worth another try: rate limits, timeouts/conflicts reported by proxies, server faults.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# Local servers (llama.cpp, Ollama, vLLM) ignore the key, but the SDK refuses to start without one.
NO_KEY_PLACEHOLDER = "sk-no-key-required"
CACHE_FORMAT = 1
REACT_STOP = "\nObservation:"


# ---------------------------------------------------------------- errors


class LLMError(SparqlnavError):
    """An LLM request failed for good; the message is one line a person can act on."""

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 0) -> None:
        super().__init__(_one_line(message))
        self.status_code = status_code
        self.attempts = attempts


class BudgetExceeded(LLMError):
    """The run's LLM budget (calls, tokens or seconds) is used up; no request was sent."""


class LLMOutputError(LLMError):
    """The model answered, but not with what was asked for (e.g. JSON that fails the schema)."""

    reply: LLMReply | None = None  # the answer that could not be used, when there was one


# ---------------------------------------------------------------- configuration


class ModelPrice(BaseModel):
    """USD per one million input and output tokens."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    input_per_million: float = Field(alias="input", ge=0)
    output_per_million: float = Field(alias="output", ge=0)


class LLMConfig(BaseModel):
    """Which OpenAI-compatible server and model to use, and how to talk to it."""

    model_config = ConfigDict(frozen=True)

    model: str
    base_url: str | None = None  # None = the SDK's default (api.openai.com)
    api_key: SecretStr | None = None
    temperature: float | None = 0.0
    top_p: float | None = None
    seed: int | None = None
    max_output_tokens: int | None = None
    # Older local servers only know `max_tokens`; OpenAI reasoning models only `max_completion_tokens`.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # Per request, overall (not per read: a server sending a byte now and then does not stretch it).
    timeout_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    max_retries: int = Field(default=4, ge=0)
    # Wall-clock seconds of LLM use per question (strategies make a Budget of it); retries stay within it.
    budget_s: float | None = Field(default=300.0, gt=0, allow_inf_nan=False)
    retry_backoff_s: float = Field(default=1.0, ge=0)
    max_backoff_s: float = Field(default=30.0, ge=0)
    max_retry_after_s: float = Field(default=120.0, ge=0)
    tool_mode: ToolMode = "native"
    # A reply is a few KB of JSON; a server sending gigabytes must not fill our memory with them.
    max_response_bytes: int = Field(default=16 * 1024 * 1024, ge=64 * 1024)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    cache_dir: Path | None = None

    def price(self, model: str | None = None) -> ModelPrice | None:
        """The price entry of `model` (default: the configured model), if any."""
        return self.prices.get(model or self.model)


def load_prices(path: Path) -> dict[str, ModelPrice]:
    """Read a JSON price table: {"model": {"input": usd_per_1m, "output": usd_per_1m}, ...}."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("top level must be an object keyed by model name")
        return {str(name): ModelPrice.model_validate(entry) for name, entry in raw.items()}
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read LLM price table {path}: {_one_line(str(exc))}") from exc


# ---------------------------------------------------------------- messages and replies


class ToolSpec(BaseModel):
    """A tool the model may call: name, what it does, JSON Schema of its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    def openai(self) -> dict[str, Any]:
        """The OpenAI `tools` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolCall(BaseModel):
    """One tool call by the model; malformed arguments are kept raw with the reason in parse_error."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str = ""
    parse_error: str | None = None


class Message(BaseModel):
    """One chat message; assistant messages may carry tool calls, tool messages answer one."""

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None  # the tool's name on tool messages

    @classmethod
    def system(cls, content: str) -> Message:
        """A system message."""
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        """A user message."""
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: Sequence[ToolCall] = ()) -> Message:
        """An assistant message, optionally with the tool calls it made."""
        return cls(role="assistant", content=content, tool_calls=list(tool_calls))

    @classmethod
    def tool(cls, call: ToolCall, content: str) -> Message:
        """The result of `call`, to send back to the model."""
        return cls(role="tool", content=content, tool_call_id=call.id, name=call.name)


class LLMUsage(BaseModel):
    """Tokens, cost and time of one LLM call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = False
    latency_s: float = 0.0
    cached: bool = False


class LLMReply(BaseModel):
    """What the model said: text, tool calls, usage and why it stopped."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: LLMUsage = Field(default_factory=LLMUsage)
    finish_reason: str | None = None
    model: str | None = None

    def as_message(self) -> Message:
        """This reply as an assistant message for the conversation history."""
        return Message.assistant(self.text, self.tool_calls)


@dataclass(frozen=True)
class StructuredReply(Generic[M]):
    """A validated structured answer with the reply it came from."""

    value: M
    reply: LLMReply


# ---------------------------------------------------------------- accounting


@dataclass
class UsageTotals:
    """Running totals over many calls; cached replies count with their original tokens and cost."""

    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    cached_calls: int = 0
    cost_known: bool = True  # False once any call had no price

    def add(self, usage: LLMUsage) -> None:
        """Count one call."""
        self.llm_calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cost_usd += usage.cost_usd
        self.seconds += usage.latency_s
        self.cached_calls += int(usage.cached)
        self.cost_known = self.cost_known and usage.cost_known

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return asdict(self)


CallOutcome = Literal["ok", "http_error", "timeout", "unreachable", "unparseable", "cached"]
# Outcomes of requests the server answered: the requests a run's usage counts.
SERVED_OUTCOMES: frozenset[CallOutcome] = frozenset({"ok", "http_error", "unparseable"})


@dataclass(frozen=True)
class CallRecord:
    """One request sent to the LLM server (each retry is its own), or one reply taken from the cache.

    `served` requests are those the server answered: a reply (`ok`), an HTTP error (`http_error`) or
    output that could not be used (`unparseable`); they are what usage counts. A `timeout` or an
    `unreachable` server got no answer, and a `cached` reply sent no request: these are recorded but
    not counted (a cache hit carries the tokens of the reply it replays, for information only).
    """

    purpose: str
    model: str
    attempt: int  # 1 for the first request of a call, 2 for its first retry, …
    outcome: CallOutcome
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    cost_known: bool = False
    status_code: int | None = None
    error: str | None = None

    @property
    def served(self) -> bool:
        """Whether the server answered this request (so usage counts it)."""
        return self.outcome in SERVED_OUTCOMES

    def event_data(self) -> dict[str, Any]:
        """The data of this request's `llm_call` trace event."""
        data = asdict(self)
        data.update(latency_s=round(self.latency_s, 4), served=self.served, cached=self.outcome == "cached")
        return {k: v for k, v in data.items() if v is not None}


# Receives every request a call sends; passed with each call so that a client shared by concurrent
# runs reports each request to the run that made it.
Recorder = Callable[[CallRecord], None]


def trace_recorder(trace: Trace) -> Recorder:
    """A recorder writing each request as an `llm_call` event of `trace` (which keeps the usage)."""

    def record(call: CallRecord) -> None:
        trace.emit("llm_call", **call.event_data())

    return record


@dataclass(frozen=True)
class _Reporter:
    """Reports the requests of one call to its recorder, if it has one."""

    record: Recorder | None
    purpose: str
    model: str
    priced: bool  # whether the model has a price: a request without usage then costs a known 0

    def __call__(
        self,
        attempt: int,
        outcome: CallOutcome,
        latency_s: float,
        *,
        usage: LLMUsage | None = None,
        model: str | None = None,
        status_code: int | None = None,
        error: str | None = None,
    ) -> None:
        if self.record is None:
            return
        u = usage or LLMUsage()
        self.record(
            CallRecord(
                purpose=self.purpose,
                model=model or self.model,
                attempt=attempt,
                outcome=outcome,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                latency_s=latency_s,
                cost_usd=u.cost_usd,
                cost_known=u.cost_known if usage is not None else self.priced,
                status_code=status_code,
                error=error,
            )
        )


@dataclass
class Budget:
    """Limits on one run's LLM use; a None limit is no limit. The clock starts at creation."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    calls: int = 0
    tokens: int = 0
    started_at: float = field(init=False)

    def __post_init__(self) -> None:
        self.started_at = self.clock()

    def elapsed(self) -> float:
        """Seconds since the budget was created."""
        return self.clock() - self.started_at

    def remaining_seconds(self) -> float | None:
        """Seconds left, or None without a time limit."""
        return None if self.max_seconds is None else self.max_seconds - self.elapsed()

    def charge(self, usage: LLMUsage) -> None:
        """Count one call and its tokens."""
        self.calls += 1
        self.tokens += usage.input_tokens + usage.output_tokens

    def exceeded(self) -> str | None:
        """Why the budget is used up, or None while there is room for another call."""
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"LLM call budget used up ({self.calls} of {self.max_calls} calls)"
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"LLM token budget used up ({self.tokens} of {self.max_tokens} tokens)"
        remaining = self.remaining_seconds()
        if remaining is not None and remaining <= 0:
            return f"LLM time budget used up ({self.elapsed():.1f} of {self.max_seconds:g} s)"
        return None


# ---------------------------------------------------------------- wire format


def _native_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _wire_arguments(call)},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _wire_arguments(call: ToolCall) -> str:
    # Some servers re-parse history arguments and fail on bad JSON; wrap the raw text instead.
    if call.parse_error is None:
        return call.raw_arguments or json.dumps(call.arguments, ensure_ascii=False)
    return json.dumps({"malformed_arguments": call.raw_arguments}, ensure_ascii=False)


def render_tools(tools: Sequence[ToolSpec]) -> str:
    """The tool list as text for a ReAct system prompt."""
    blocks = []
    for tool in tools:
        schema = json.dumps(tool.parameters, ensure_ascii=False, separators=(", ", ": "))
        blocks.append(f"### {tool.name}\n{tool.description.strip()}\nArguments: {schema}")
    return "\n\n".join(blocks)


def _react_action(call: ToolCall) -> str:
    args = (
        call.raw_arguments
        if call.parse_error is not None
        else json.dumps(call.arguments, ensure_ascii=False)
    )
    return f"Action: {call.name}({args})"


def _react_messages(
    messages: Sequence[Message], tools: Sequence[ToolSpec], template: str
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if tools:
        tools_text = Template(template).safe_substitute(tools=render_tools(tools))
        if messages and messages[0].role == "system":
            out.append({"role": "system", "content": f"{messages[0].content}\n\n{tools_text}"})
            messages = messages[1:]
        else:
            out.append({"role": "system", "content": tools_text})
    for message in messages:
        if message.role == "tool":
            label = f"Observation ({message.name}):" if message.name else "Observation:"
            entry = {"role": "user", "content": f"{label}\n{message.content}"}
        elif message.role == "assistant":
            content = message.content
            if message.tool_calls and not re.search(r"^\s*Action\s*:", content, re.M | re.I):
                actions = "\n".join(_react_action(c) for c in message.tool_calls)
                content = f"{content}\n{actions}".strip()
            entry = {"role": "assistant", "content": content}
        else:
            entry = {"role": message.role, "content": message.content}
        # Strict chat templates (e.g. Mistral's) reject two user turns in a row: merge them.
        if out and entry["role"] == "user" and out[-1]["role"] == "user":
            out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n\n{entry['content']}"}
        else:
            out.append(entry)
    return out


# ---------------------------------------------------------------- parsing


def _parse_json_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    if not raw.strip():
        return {}, None
    try:
        value = _LENIENT_JSON.decode(raw)
    except json.JSONDecodeError as exc:
        return (
            {},
            f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        )
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


_JSON_NAMES = {"true": True, "false": False, "null": None}
# Models often put raw newlines inside JSON strings (multi-line SPARQL); strict=False accepts them.
_LENIENT_JSON = json.JSONDecoder(strict=False)


def _literal(node: ast.expr) -> Any:
    # Models mix JSON and Python spellings (true/True, null/None); accept both.
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.Dict):
        return {
            _literal(k): _literal(v)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    return ast.literal_eval(node)


def _parse_call_arguments(text: str, spec: ToolSpec | None) -> tuple[dict[str, Any], str | None]:
    """Arguments written inside `name(...)`: a JSON object, or Python-style positional/keyword values."""
    stripped = text.strip()
    if not stripped:
        return {}, None
    json_error: str | None = None
    if stripped.startswith("{"):
        args, json_error = _parse_json_arguments(stripped)
        if json_error is None:
            return args, None
    try:
        tree = ast.parse(f"_call({stripped})", mode="eval").body
    except SyntaxError as exc:
        return {}, json_error or f"cannot read the arguments: {exc.msg}"
    if not isinstance(tree, ast.Call):
        return {}, json_error or "cannot read the arguments"
    names = list((spec.parameters.get("properties") or {}) if spec else {})
    values: dict[str, Any] = {}
    try:
        if len(tree.args) == 1 and not tree.keywords and isinstance(tree.args[0], ast.Dict):
            value = _literal(tree.args[0])
            return {str(k): v for k, v in value.items()}, None
        for index, arg in enumerate(tree.args):
            if index >= len(names):
                return (
                    {},
                    json_error or "positional arguments do not match the tool; pass a JSON object",
                )
            values[names[index]] = _literal(arg)
        for keyword in tree.keywords:
            if keyword.arg is None:
                return {}, "cannot use ** in arguments; pass a JSON object"
            values[keyword.arg] = _literal(keyword.value)
    except (ValueError, TypeError, SyntaxError):
        return {}, json_error or "arguments must be plain values (strings, numbers, lists, objects)"
    return values, None


_REACT_KEYWORD = re.compile(r"^[ \t]*(Thought|Action|Observation|Final Answer)[ \t]*:", re.M | re.I)
_ACTION = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*", re.M | re.I)
_ACTION_INPUT = re.compile(r"^([A-Za-z_][\w.\-]*)\s*\n\s*Action Input\s*:\s*(.*)$", re.S | re.I)
_ACTION_NAME = re.compile(r"`*\s*([A-Za-z_][\w.\-]*)\s*\(")


def _action_block(text: str, start: int) -> str:
    following = _REACT_KEYWORD.search(text, start)
    block = text[start : following.start() if following else len(text)]
    return block.strip().strip("`").strip()


def _parse_action(block: str, call_id: str, specs: Mapping[str, ToolSpec]) -> ToolCall:
    legacy = _ACTION_INPUT.match(block)
    if legacy:
        name, raw = legacy.group(1), legacy.group(2).strip().strip("`").strip()
        args, error = _parse_call_arguments(raw, specs.get(name))
        return ToolCall(id=call_id, name=name, arguments=args, raw_arguments=raw, parse_error=error)
    head = _ACTION_NAME.match(block)
    if head is None:
        bare = re.fullmatch(r"[A-Za-z_][\w.\-]*", block)
        if bare:  # `Action: stop` without parentheses
            return ToolCall(id=call_id, name=block, raw_arguments="")
        return ToolCall(
            id=call_id,
            name="",
            raw_arguments=block,
            parse_error="cannot read the action; write it as Action: tool_name({...})",
        )
    name, rest = head.group(1), block[head.end() :]
    lead = rest.lstrip()
    if lead.startswith("{"):
        # A JSON object may contain ')' inside strings: decode it first, then expect ')'.
        try:
            value, end = _LENIENT_JSON.raw_decode(lead)
        except json.JSONDecodeError:
            value, end = None, 0
        if isinstance(value, dict) and lead[end:].lstrip().startswith(")"):
            return ToolCall(id=call_id, name=name, arguments=value, raw_arguments=lead[:end])
    close = rest.rfind(")")
    raw = (rest[:close] if close >= 0 else rest).strip()
    args, error = _parse_call_arguments(raw, specs.get(name))
    if close < 0 and error is None:
        error = "the action has no closing ')'"
    if error is not None:
        raw = rest.strip()  # show the model everything it wrote after '('
    return ToolCall(
        id=call_id,
        name=name,
        arguments=args if error is None else {},
        raw_arguments=raw,
        parse_error=error,
    )


def parse_react(
    text: str, tools: Sequence[ToolSpec] = (), id_prefix: str = "react"
) -> list[ToolCall]:
    """Tool calls written as `Action: name({...})` (or `name(key=value)`) in a ReAct reply."""
    specs = {t.name: t for t in tools}
    calls = []
    for index, match in enumerate(_ACTION.finditer(text)):
        block = _action_block(text, match.end())
        calls.append(_parse_action(block, f"{id_prefix}-{index}", specs))
    return calls


def _native_tool_calls(raw_calls: Any) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for index, raw in enumerate(raw_calls or []):
        entry = raw if isinstance(raw, dict) else {}
        function: dict[str, Any] = (
            entry["function"] if isinstance(entry.get("function"), dict) else {}
        )
        call_id = str(entry.get("id") or f"call-{index}")
        arguments = function.get("arguments")
        # Some servers (Ollama, some vLLM parsers) send arguments as an object instead of a string.
        raw_text = (
            json.dumps(arguments, ensure_ascii=False)
            if isinstance(arguments, dict)
            else str(arguments or "")
        )
        args, error = _parse_json_arguments(raw_text)
        calls.append(
            ToolCall(
                id=call_id,
                name=str(function.get("name") or ""),
                arguments=args,
                raw_arguments=raw_text,
                parse_error=error,
            )
        )
    return calls


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (whole text, fenced block or embedded), or None."""
    stripped = text.strip()
    try:
        whole = _LENIENT_JSON.decode(stripped)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return whole
    decoder = _LENIENT_JSON
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _validate_json(text: str, schema: type[M]) -> M:
    obj = extract_json_object(text)
    preview = _one_line(text)[:80]
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


# ---------------------------------------------------------------- cache


class _ReplyCache:
    """Replies on disk, one JSON file per request hash; writes are atomic."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @staticmethod
    def key(body: Mapping[str, Any]) -> str:
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
        path = self._path(key)
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            return LLMReply.model_validate(stored["reply"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is a miss; the next write replaces it

    def put(self, key: str, body: Mapping[str, Any], reply: LLMReply) -> None:
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


# ---------------------------------------------------------------- client


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _default_template() -> str:
    return (
        resources.files(__package__).joinpath("react_tools.md").read_text(encoding="utf-8")
    )


class LLMClient:
    """Chat with an OpenAI-compatible server; accounts usage, retries, caches, respects budgets."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        budget: Budget | None = None,
        react_template: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.budget = budget
        self._react_template = react_template if react_template is not None else _default_template()
        self._sleep = sleep
        self._clock = clock
        self._cache = _ReplyCache(config.cache_dir) if config.cache_dir else None
        self._totals = UsageTotals()
        self._lock = threading.Lock()
        self._json_schema_supported: bool | None = None
        key = config.api_key.get_secret_value() if config.api_key else ""
        import openai

        # Every request ends at its deadline however slowly the server drips its answer, and a request of a
        # cancelled run stops waiting at once (a request that gave up must not keep a hanging call alive).
        self._deadline = Deadline()
        http = sdk_http()
        # Our own retry loop (max_retries=0 here) so retries are visible, bounded and testable.
        self._sdk = openai.OpenAI(
            api_key=key or NO_KEY_PLACEHOLDER,
            base_url=config.base_url,
            timeout=config.timeout_s,
            max_retries=0,
            http_client=http.Client(
                transport=guarded_transport(http, self._deadline, max_response_bytes=config.max_response_bytes),
                timeout=config.timeout_s,
                follow_redirects=True,
            ),
        )

    # -- lifecycle

    def close(self) -> None:
        """Close the HTTP connections."""
        self._sdk.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def totals(self) -> UsageTotals:
        """A snapshot of the usage of every call made through this client."""
        with self._lock:
            return UsageTotals(**self._totals.as_dict())

    # -- public calls

    def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        response_format: Mapping[str, Any] | None = None,
        *,
        budget: Budget | None = None,
        purpose: str = "chat",
        record: Recorder | None = None,
    ) -> LLMReply:
        """One chat completion; tool calls come back parsed whatever the tool mode.

        Every request sent (each retry too) and every cache hit is reported to `record` as a
        CallRecord tagged with `purpose`; see CallRecord for which of them usage counts.
        """
        reporter = self._reporter(record, purpose)
        reply, _ = self._exchange(messages, tools, response_format, budget, reporter, _accept_any)
        return reply

    def chat_json(
        self,
        messages: Sequence[Message],
        schema: type[M],
        *,
        budget: Budget | None = None,
        repairs: int = 0,
        purpose: str = "structured",
        record: Recorder | None = None,
    ) -> StructuredReply[M]:
        """A reply validated against a pydantic model (json_schema response format, else text).

        Requests are reported to `record` as in `chat`; a reply that fails the schema is `unparseable`.
        """
        schema_json = schema.model_json_schema()
        note = (
            "Reply with one JSON object that matches this JSON Schema, and nothing else:\n"
            + json.dumps(schema_json, ensure_ascii=False)
        )
        convo = _with_system_note(messages, note)
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": _schema_name(schema), "schema": schema_json, "strict": False},
        }
        reporter = self._reporter(record, purpose)

        def accept(reply: LLMReply) -> M:
            return _validate_json(reply.text, schema)

        error: LLMOutputError | None = None
        for _ in range(repairs + 1):
            try:
                reply, value = self._chat_structured(convo, response_format, budget, reporter, accept)
                return StructuredReply(value=value, reply=reply)
            except LLMOutputError as exc:
                if exc.reply is None:
                    raise
                error = exc
                convo = [
                    *convo,
                    exc.reply.as_message(),
                    Message.user(
                        f"That reply could not be used: {exc}. Reply again with only the JSON object."
                    ),
                ]
        assert error is not None
        raise error

    # -- internals

    def _chat_structured(
        self,
        convo: Sequence[Message],
        response_format: Mapping[str, Any],
        budget: Budget | None,
        reporter: _Reporter,
        accept: Callable[[LLMReply], T],
    ) -> tuple[LLMReply, T]:
        if self._json_schema_supported is not False:
            try:
                result = self._exchange(convo, None, response_format, budget, reporter, accept)
                self._json_schema_supported = True
                return result
            except BudgetExceeded:
                raise
            except LLMOutputError as exc:
                if exc.reply is not None:  # the server took the response format and answered
                    self._json_schema_supported = True
                raise
            except LLMError as exc:
                # Servers without structured output answer 400/422; fall back to plain text.
                if exc.status_code not in (400, 422) or self._json_schema_supported:
                    raise
                self._json_schema_supported = False
        return self._exchange(convo, None, None, budget, reporter, accept)

    def _exchange(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        response_format: Mapping[str, Any] | None,
        budget: Budget | None,
        reporter: _Reporter,
        accept: Callable[[LLMReply], T],
    ) -> tuple[LLMReply, T]:
        """One reply (from the cache or the server) and what `accept` makes of it, every request reported."""
        # Without a run's budget, the call alone gets the configured seconds: its retries stay within them.
        budget = budget if budget is not None else self.budget
        if budget is None:
            budget = self.question_budget()
        self._check_budget(budget)
        tools = list(tools or ())
        body = self._request_body(messages, tools, response_format)
        started = self._clock()
        key = _ReplyCache.key(body) if self._cache else None
        if self._cache and key:
            stored = self._cache.get(key)
            if stored is not None:
                usage = stored.usage.model_copy(
                    update={"cached": True, "latency_s": self._clock() - started}
                )
                reply = stored.model_copy(update={"usage": usage})
                self._account(reply.usage, budget)
                return reply, self._accepted(reply, accept, reporter, 1, "cached")
        data, attempt, latency = self._send(body, budget, reporter)
        try:
            reply = self._reply_from(data, tools, messages, self._clock() - started)
        except LLMError as exc:
            reporter(attempt, "unparseable", latency, error=str(exc))
            raise
        if self._cache and key:
            self._cache.put(key, body, reply)
        self._account(reply.usage, budget)
        return reply, self._accepted(reply, accept, reporter, attempt, "ok", latency)

    def _accepted(
        self,
        reply: LLMReply,
        accept: Callable[[LLMReply], T],
        reporter: _Reporter,
        attempt: int,
        outcome: CallOutcome,
        latency: float | None = None,
    ) -> T:
        """`accept(reply)`, reporting the request as `outcome`, or as unparseable when it fails."""
        seconds = reply.usage.latency_s if latency is None else latency
        try:
            value = accept(reply)
        except LLMOutputError as exc:
            exc.reply = reply
            failed: CallOutcome = "cached" if outcome == "cached" else "unparseable"
            reporter(attempt, failed, seconds, usage=reply.usage, model=reply.model, error=str(exc))
            raise
        reporter(attempt, outcome, seconds, usage=reply.usage, model=reply.model)
        return value

    def _reporter(self, record: Recorder | None, purpose: str) -> _Reporter:
        cfg = self.config
        return _Reporter(record, purpose, cfg.model, priced=cfg.price() is not None)

    def question_budget(self, seconds: float | None = None) -> Budget:
        """A fresh budget for one question's calls: `seconds` when given (what a cascade leaves), else the
        configured wall-clock seconds."""
        return Budget(max_seconds=self.config.budget_s if seconds is None else seconds, clock=self._clock)

    def _check_budget(self, budget: Budget | None) -> None:
        if budget is not None:
            reason = budget.exceeded()
            if reason:
                raise BudgetExceeded(reason)

    def _account(self, usage: LLMUsage, budget: Budget | None) -> None:
        with self._lock:
            self._totals.add(usage)
        if budget is not None:
            budget.charge(usage)

    def _request_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        response_format: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model}
        if cfg.tool_mode == "react":
            body["messages"] = _react_messages(messages, tools, self._react_template)
            if tools:
                body["stop"] = [REACT_STOP]
        else:
            body["messages"] = [_native_message(m) for m in messages]
            if tools:
                body["tools"] = [t.openai() for t in tools]
        if cfg.temperature is not None:
            body["temperature"] = cfg.temperature
        if cfg.top_p is not None:
            body["top_p"] = cfg.top_p
        if cfg.seed is not None:
            body["seed"] = cfg.seed
        if cfg.max_output_tokens is not None:
            body[cfg.max_tokens_field] = cfg.max_output_tokens
        if response_format is not None:
            body["response_format"] = dict(response_format)
        return body

    def _send(
        self, body: dict[str, Any], budget: Budget | None, reporter: _Reporter
    ) -> tuple[dict[str, Any], int, float]:
        """The decoded answer, the attempt that got it and its latency; retries as configured."""
        cfg = self.config
        where = f"{cfg.base_url or 'api.openai.com'} ({cfg.model})"
        import openai

        def attempt(number: int) -> tuple[dict[str, Any], int, float]:
            timeout = cfg.timeout_s
            remaining = budget.remaining_seconds() if budget else None
            if remaining is not None:
                timeout = max(0.001, min(timeout, remaining))
            started = self._clock()
            try:
                with self._deadline.within(timeout):
                    raw = self._sdk.chat.completions.with_raw_response.create(**body, timeout=timeout)
            except openai.APITimeoutError as exc:
                last = f"no answer within {timeout:g} s"
                reporter(number, "timeout", self._clock() - started, error=last)
                raise _Failure(last) from exc
            except openai.APIConnectionError as exc:
                cause = _one_line(str(exc.__cause__ or exc))
                if cause.startswith(TOO_LARGE):  # the same server would send the same again: no retry
                    reporter(number, "unparseable", self._clock() - started, error=cause)
                    raise LLMError(f"LLM request to {where} failed: {cause}", attempts=number) from exc
                last = f"connection failed ({cause})"
                reporter(number, "unreachable", self._clock() - started, error=last)
                if number > 1 and _nobody_there(exc):
                    # A refused connection or an unknown host is not busy, it is absent: one retry, not five.
                    raise LLMError(f"LLM request to {where} failed after {number} attempt(s): {last}",
                                   attempts=number) from exc
                raise _Failure(last) from exc
            except openai.APIStatusError as exc:
                status = exc.status_code
                last = f"HTTP {status}: {_server_message(exc)}"
                reporter(number, "http_error", self._clock() - started, status_code=status, error=last)
                if status not in RETRY_STATUSES:
                    raise LLMError(
                        f"LLM request to {where} failed: {last}", status_code=status, attempts=number
                    ) from exc
                raise _Failure(last, status, retry_after(exc.response.headers)) from exc
            latency = self._clock() - started
            try:
                return _decode_body(raw.text, where), number, latency
            except LLMError as exc:
                reporter(number, "unparseable", latency, error=str(exc))
                exc.attempts = number
                raise

        policy = RetryPolicy(
            cfg.max_retries, cfg.retry_backoff_s, cfg.max_backoff_s, cfg.max_retry_after_s
        )
        time_left = budget.remaining_seconds if budget is not None else lambda: None
        try:
            return with_retries(attempt, policy, time_left=time_left, sleep=self._sleep)
        except GaveUp as gave_up:
            last = gave_up.last.reason
            status_code = gave_up.last.status_code if isinstance(gave_up.last, _Failure) else None
            if gave_up.why == "retry_after":
                raise LLMError(
                    f"LLM request to {where} failed: {last}; server asks to wait {gave_up.wait:.0f} s "
                    f"(more than {cfg.max_retry_after_s:g} s)",
                    status_code=status_code,
                    attempts=gave_up.attempts,
                ) from gave_up.last
            if gave_up.why == "deadline":
                spent = f"{budget.elapsed():.0f} of {budget.max_seconds:g} s" if budget else "?"
                raise BudgetExceeded(
                    f"LLM time budget would run out while retrying ({spent} used; after "
                    f"{gave_up.attempts} attempt(s): {last})",
                    status_code=status_code,
                    attempts=gave_up.attempts,
                ) from gave_up.last
            raise LLMError(
                f"LLM request to {where} failed after {gave_up.attempts} attempt(s): {last}",
                status_code=status_code,
                attempts=gave_up.attempts,
            ) from gave_up.last

    def _reply_from(
        self,
        data: dict[str, Any],
        tools: Sequence[ToolSpec],
        messages: Sequence[Message],
        latency: float,
    ) -> LLMReply:
        choices = data.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            raise LLMError(f"LLM server returned no choices: {_one_line(json.dumps(data))[:200]}")
        choice = choices[0]
        message = choice.get("message") or {}
        text = _content_text(message.get("content"))
        if self.config.tool_mode == "react":
            turn = sum(1 for m in messages if m.role == "assistant")
            calls = parse_react(text, tools, id_prefix=f"react-{turn}") if tools else []
        else:
            raw_calls = message.get("tool_calls")
            if not raw_calls and isinstance(message.get("function_call"), dict):
                raw_calls = [{"id": "call-0", "function": message["function_call"]}]
            calls = _native_tool_calls(raw_calls)
        model = str(data.get("model") or self.config.model)
        return LLMReply(
            text=text,
            tool_calls=calls,
            usage=self._usage(data.get("usage") or {}, model, latency),
            finish_reason=choice.get("finish_reason"),
            model=model,
        )

    def _usage(self, raw: Mapping[str, Any], model: str, latency: float) -> LLMUsage:
        input_tokens = int(raw.get("prompt_tokens") or raw.get("input_tokens") or 0)
        output_tokens = int(raw.get("completion_tokens") or raw.get("output_tokens") or 0)
        price = self.config.price() or self.config.price(model)
        cost = 0.0
        if price is not None:
            cost = (
                input_tokens * price.input_per_million + output_tokens * price.output_per_million
            ) / 1e6
        return LLMUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost,
            cost_known=price is not None,
            latency_s=latency,
        )


def _accept_any(reply: LLMReply) -> None:
    """Any reply will do (plain chat)."""


def _nobody_there(exc: BaseException) -> bool:
    """Whether a connection error says no server is there at all (refused, or a host name that does not resolve)."""
    seen: BaseException | None = exc
    for _ in range(8):  # the SDK's error wraps httpx's, which wraps httpcore's, which wraps the OSError
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError | socket.gaierror):
            return True
        if isinstance(seen, OSError) and seen.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _Failure(Retryable):
    """A request that may succeed when sent again, with the HTTP status it got, if any."""

    def __init__(self, reason: str, status_code: int | None = None, asked: float | None = None) -> None:
        super().__init__(reason, asked=asked)
        self.status_code = status_code


def _decode_body(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMError(
            f"LLM server {where} sent a non-JSON reply: {_one_line(text)[:120]!r}"
        ) from exc
    if not isinstance(data, dict):
        raise LLMError(f"LLM server {where} sent an unexpected reply: {_one_line(text)[:120]!r}")
    return data


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return _one_line(str(inner["message"]))[:200]
        if isinstance(inner, str):
            return _one_line(inner)[:200]
    return _one_line(exc.response.reason_phrase or exc.message)[:200]


def _schema_name(schema: type[BaseModel]) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "reply"


def _with_system_note(messages: Sequence[Message], note: str) -> list[Message]:
    if messages and messages[0].role == "system":
        first = messages[0].model_copy(update={"content": f"{messages[0].content}\n\n{note}"})
        return [first, *messages[1:]]
    return [Message.system(note), *messages]
