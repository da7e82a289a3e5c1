"""The OpenAI-compatible chat client: native or text-ReAct tool calls, structured output, retries, cache, budgets."""

from __future__ import annotations

import errno
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from sparqlnav.llm.cache import ReplyCache
from sparqlnav.llm.config import LLMConfig
from sparqlnav.llm.errors import BudgetExceeded, LLMError, LLMOutputError, one_line
from sparqlnav.llm.jsonout import json_arguments, validate_json
from sparqlnav.llm.messages import (
    LLMReply,
    LLMUsage,
    M,
    Message,
    StructuredReply,
    ToolCall,
    ToolSpec,
)
from sparqlnav.llm.react import REACT_STOP, parse_react, react_messages
from sparqlnav.llm.usage import Budget, CallOutcome, CallReporter, Recorder, UsageTotals
from sparqlnav.redirects import OffOrigin, OriginGuard
from sparqlnav.retry import GaveUp, Retryable, RetryPolicy, retry_after, with_retries
from sparqlnav.transport import TOO_LARGE, Deadline, guarded_transport, sdk_http

if TYPE_CHECKING:
    import openai  # imported when a client is made: it takes a second, and many runs need no LLM

__all__ = ["LLMClient"]

T = TypeVar("T")

# Statuses worth another try: rate limits, timeouts/conflicts reported by proxies, server faults.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# Local servers (llama.cpp, Ollama, vLLM) ignore the key, but the SDK refuses to start without one.
NO_KEY_PLACEHOLDER = "sk-no-key-required"


# ---------------------------------------------------------------- the native wire format


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
        args, error = json_arguments(raw_text)
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



# ---------------------------------------------------------------- the client


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
        self._cache = ReplyCache(config.cache_dir) if config.cache_dir else None
        self._totals = UsageTotals()
        self._lock = threading.Lock()
        self._json_schema_supported: bool | None = None
        key = config.api_key.get_secret_value() if config.api_key else ""
        import openai

        # Every request ends at its deadline however slowly the server drips its answer, and a request of a
        # cancelled run stops waiting at once (a request that gave up must not keep a hanging call alive).
        self._deadline = Deadline()
        http = sdk_http()
        http_client = http.Client(
            transport=guarded_transport(http, self._deadline, max_response_bytes=config.max_response_bytes),
            timeout=config.timeout_s,
            follow_redirects=True,
        )
        # Our own retry loop (max_retries=0 here) so retries are visible, bounded and testable.
        self._sdk = openai.OpenAI(
            api_key=key or NO_KEY_PLACEHOLDER,
            base_url=config.base_url,
            timeout=config.timeout_s,
            max_retries=0,
            http_client=http_client,
        )
        # Redirects within the server's origin only: another would be sent the whole prompt (and the key's
        # header when it is not Authorization). Checked before each request, each redirect's included.
        http_client.event_hooks = {"request": [OriginGuard(str(self._sdk.base_url), what="the LLM server")]}

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
            return validate_json(reply.text, schema)

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
        reporter: CallReporter,
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
        reporter: CallReporter,
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
        key = ReplyCache.key(body) if self._cache else None
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
        reporter: CallReporter,
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

    def _reporter(self, record: Recorder | None, purpose: str) -> CallReporter:
        cfg = self.config
        return CallReporter(record, purpose, cfg.model, priced=cfg.price() is not None)

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
            body["messages"] = react_messages(messages, tools, self._react_template)
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
        self, body: dict[str, Any], budget: Budget | None, reporter: CallReporter
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
            except (OffOrigin, openai.APIConnectionError) as exc:
                # openai 3.x lets the redirect hook's OffOrigin through; 1.x wraps it in an APIConnectionError.
                off = exc if isinstance(exc, OffOrigin) else exc.__cause__
                cause = one_line(str(off or exc))
                if isinstance(off, OffOrigin):  # the same server would redirect again: no retry
                    reporter(number, "unreachable", self._clock() - started, error=cause)
                    raise LLMError(f"LLM request to {where} failed: {cause}", attempts=number) from exc
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
            raise LLMError(f"LLM server returned no choices: {one_line(json.dumps(data))[:200]}")
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
            f"LLM server {where} sent a non-JSON reply: {one_line(text)[:120]!r}"
        ) from exc
    if not isinstance(data, dict):
        raise LLMError(f"LLM server {where} sent an unexpected reply: {one_line(text)[:120]!r}")
    return data


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return one_line(str(inner["message"]))[:200]
        if isinstance(inner, str):
            return one_line(inner)[:200]
    return one_line(exc.response.reason_phrase or exc.message)[:200]


def _schema_name(schema: type[BaseModel]) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "reply"


def _with_system_note(messages: Sequence[Message], note: str) -> list[Message]:
    if messages and messages[0].role == "system":
        first = messages[0].model_copy(update={"content": f"{messages[0].content}\n\n{note}"})
        return [first, *messages[1:]]
    return [Message.system(note), *messages]
