"""The LLM client over real HTTP against the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from scripted_llm import Call, Delay, Error, Hang, Raw, Reply, ScriptedLLM
from sparqlnav.llm import (
    Budget,
    BudgetExceeded,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMOutputError,
    LLMUsage,
    Message,
    ModelPrice,
    ToolSpec,
    extract_json_object,
    parse_react,
)
from sparqlnav.settings import Settings

SEARCH = ToolSpec(
    name="search",
    description="Find entities and properties whose labels match the query.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    },
)
STOP = ToolSpec(name="stop", description="Finish.")
QUESTION = [
    Message.system("You answer questions over a knowledge graph."),
    Message.user("Who discovered polonium?"),
]


def config(server: ScriptedLLM, **overrides: Any) -> LLMConfig:
    values: dict[str, Any] = {
        "model": "scripted-model",
        "base_url": server.base_url,
        "api_key": "test-key",
        "timeout_s": 5,
        "retry_backoff_s": 0,
    }
    values.update(overrides)
    return LLMConfig(**values)


class Sleeps:
    """Records requested back-off delays instead of waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


# ---------------------------------------------------------------- plain replies and accounting


def test_plain_reply_counts_tokens_and_prices_them(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply("Marie and Pierre Curie.", input_tokens=1000, output_tokens=500)])
    prices = {"scripted-model": ModelPrice(input=2.0, output=8.0)}
    with LLMClient(config(scripted_llm, prices=prices, max_output_tokens=256)) as client:
        reply = client.chat(QUESTION)
        totals = client.totals

    assert reply.text == "Marie and Pierre Curie."
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (1000, 500)
    assert reply.usage.cost_usd == pytest.approx(1000 * 2.0 / 1e6 + 500 * 8.0 / 1e6)
    assert reply.usage.cost_known is True
    assert reply.usage.cached is False
    assert (totals.llm_calls, totals.input_tokens, totals.output_tokens) == (1, 1000, 500)
    assert totals.cost_usd == pytest.approx(0.006)

    [body] = scripted_llm.requests
    assert body["model"] == "scripted-model"
    assert body["messages"] == [
        {"role": "system", "content": "You answer questions over a knowledge graph."},
        {"role": "user", "content": "Who discovered polonium?"},
    ]
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 256
    assert "tools" not in body
    assert scripted_llm.headers[0]["authorization"] == "Bearer test-key"


def test_unpriced_model_costs_zero_and_says_so(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply("ok", input_tokens=7, output_tokens=3)])
    with LLMClient(config(scripted_llm)) as client:
        reply = client.chat(QUESTION)
        assert client.totals.cost_known is False
    assert reply.usage.cost_usd == 0.0
    assert reply.usage.cost_known is False


# ---------------------------------------------------------------- native tool calls


def test_native_tool_call_is_parsed_and_sent_back(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(
        [
            Reply(tool_calls=[Call("search", {"query": "polonium", "limit": 5}, id="call_a")]),
            Reply("Marie Curie."),
        ]
    )
    with LLMClient(config(scripted_llm)) as client:
        first = client.chat(QUESTION, tools=[SEARCH, STOP])
        [call] = first.tool_calls
        history = [*QUESTION, first.as_message(), Message.tool(call, "wd:Q979 polonium")]
        second = client.chat(history, tools=[SEARCH, STOP])

    assert (call.id, call.name, call.arguments) == (
        "call_a",
        "search",
        {"query": "polonium", "limit": 5},
    )
    assert call.parse_error is None
    assert first.finish_reason == "tool_calls"
    assert second.text == "Marie Curie."

    sent_tools = scripted_llm.requests[0]["tools"]
    assert [t["function"]["name"] for t in sent_tools] == ["search", "stop"]
    assert sent_tools[0] == {"type": "function", "function": SEARCH.model_dump()}
    assistant, tool = scripted_llm.requests[1]["messages"][-2:]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "search",
        "arguments": json.dumps({"query": "polonium", "limit": 5}),
    }
    assert tool == {"role": "tool", "tool_call_id": "call_a", "content": "wd:Q979 polonium"}


def test_malformed_tool_call_json_is_kept_not_raised(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply(tool_calls=[Call("search", '{"query": "polo')])])
    with LLMClient(config(scripted_llm)) as client:
        [call] = client.chat(QUESTION, tools=[SEARCH]).tool_calls
    assert call.name == "search"
    assert call.arguments == {}
    assert call.raw_arguments == '{"query": "polo'
    assert call.parse_error is not None
    assert "not valid JSON" in call.parse_error


def test_non_object_tool_arguments_are_a_parse_error(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply(tool_calls=[Call("search", '["polonium"]')])])
    with LLMClient(config(scripted_llm)) as client:
        [call] = client.chat(QUESTION, tools=[SEARCH]).tool_calls
    assert call.parse_error == "arguments must be a JSON object, got list"


# ---------------------------------------------------------------- ReAct


def test_react_text_gives_the_same_tool_call_as_native(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(
        [
            Reply(tool_calls=[Call("search", {"query": "polonium"})]),
            Reply('Thought: I should look it up.\nAction: search({"query": "polonium"})'),
        ]
    )
    with LLMClient(config(scripted_llm)) as native:
        [native_call] = native.chat(QUESTION, tools=[SEARCH]).tool_calls
    with LLMClient(config(scripted_llm, tool_mode="react")) as react:
        reply = react.chat(QUESTION, tools=[SEARCH])
    [react_call] = reply.tool_calls

    assert (react_call.name, react_call.arguments) == (native_call.name, native_call.arguments)
    assert react_call.parse_error is None
    body = scripted_llm.requests[1]
    assert "tools" not in body
    assert body["stop"] == ["\nObservation:"]
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You answer questions over a knowledge graph.")
    assert "### search" in system["content"]
    assert '"required": ["query"]' in system["content"]


def test_react_history_is_rendered_as_text(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(
        [Reply('Thought: look.\nAction: search({"query": "x"})'), Reply("Thought: done.")]
    )
    with LLMClient(config(scripted_llm, tool_mode="react")) as client:
        first = client.chat(QUESTION, tools=[SEARCH])
        history = [*QUESTION, first.as_message(), Message.tool(first.tool_calls[0], "no match")]
        second = client.chat(history, tools=[SEARCH])
    assert second.tool_calls == []
    messages = scripted_llm.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == 'Thought: look.\nAction: search({"query": "x"})'
    assert messages[3]["content"] == "Observation (search):\nno match"


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        ('Action: search({"query": "a (b)", "limit": 3})', {"query": "a (b)", "limit": 3}),
        ('Action: search(query="polonium", limit=2)', {"query": "polonium", "limit": 2}),
        ('Action: search("polonium")', {"query": "polonium"}),
        ("Action: search({'query': 'polonium'})", {"query": "polonium"}),
        ('Action: `search({"query": "x"})`', {"query": "x"}),
        ('Action: search\nAction Input: {"query": "x"}', {"query": "x"}),
        ("Thought: finished.\nAction: stop()", {}),
        ("Action: stop", {}),
    ],
)
def test_react_action_forms(text: str, arguments: dict[str, Any]) -> None:
    [call] = parse_react(text, [SEARCH, STOP])
    assert call.parse_error is None
    assert call.arguments == arguments


@pytest.mark.parametrize(
    "text",
    [
        'Action: search({"query": "polo)',
        "Action: search(query=lookup())",
        "Action: ???",
        'Action: search({"query": "x"}',
    ],
)
def test_malformed_react_actions_carry_a_parse_error(text: str) -> None:
    [call] = parse_react(text, [SEARCH])
    assert call.parse_error
    assert call.arguments == {}


def test_react_reply_without_action_has_no_calls() -> None:
    assert parse_react("Thought: the answer is Marie Curie.", [SEARCH]) == []


# ---------------------------------------------------------------- retries and time limits


def test_rate_limit_is_retried_honouring_retry_after(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Error(429, "slow down", headers={"Retry-After": "0"}), Reply("ok")])
    sleeps = Sleeps()
    with LLMClient(config(scripted_llm, retry_backoff_s=5.0), sleep=sleeps) as client:
        reply = client.chat(QUESTION)
    assert reply.text == "ok"
    assert len(scripted_llm.requests) == 2
    assert sleeps.delays == [0.0]  # the server's Retry-After, not the 5 s back-off


def test_backoff_grows_exponentially(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Error(503), Error(502), Error(500), Reply("ok")])
    sleeps = Sleeps()
    cfg = config(scripted_llm, retry_backoff_s=1.0, max_backoff_s=3.0)
    with LLMClient(cfg, sleep=sleeps) as client:
        assert client.chat(QUESTION).text == "ok"
    assert sleeps.delays == [1.0, 2.0, 3.0]


def test_server_errors_give_up_after_max_retries(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Error(500, "boom\nsecond line")] * 3)
    with LLMClient(config(scripted_llm, max_retries=2)) as client, pytest.raises(LLMError) as info:
        client.chat(QUESTION)
    assert len(scripted_llm.requests) == 3
    assert info.value.status_code == 500
    assert info.value.attempts == 3
    assert "\n" not in str(info.value)
    assert "HTTP 500: boom second line" in str(info.value)


def test_client_errors_are_not_retried(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Error(401, "bad key"), Reply("never")])
    with (
        LLMClient(config(scripted_llm)) as client,
        pytest.raises(LLMError, match="HTTP 401: bad key"),
    ):
        client.chat(QUESTION)
    assert len(scripted_llm.requests) == 1


def test_retry_after_beyond_the_limit_fails_at_once(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Error(429, headers={"Retry-After": "3600"}), Reply("never")])
    with (
        LLMClient(config(scripted_llm, max_retry_after_s=60)) as client,
        pytest.raises(LLMError, match="asks to wait 3600 s"),
    ):
        client.chat(QUESTION)
    assert len(scripted_llm.requests) == 1


def test_server_that_never_answers_is_an_error(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Hang(), Hang()])
    with (
        LLMClient(config(scripted_llm, timeout_s=0.5, max_retries=1)) as client,
        pytest.raises(LLMError, match=r"no answer within 0\.5 s") as info,
    ):
        client.chat(QUESTION)
    assert info.value.attempts == 2
    assert len(scripted_llm.requests) == 2


def test_slow_answer_within_the_limit_succeeds(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Delay(0.2, Reply("late but fine"))])
    with LLMClient(config(scripted_llm, timeout_s=5)) as client:
        assert client.chat(QUESTION).text == "late but fine"


def test_unreachable_server_is_an_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cfg = LLMConfig(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, retry_backoff_s=0
    )
    with LLMClient(cfg) as client, pytest.raises(LLMError, match="connection failed") as info:
        client.chat(QUESTION)
    assert info.value.attempts == 2


def test_non_json_answer_is_an_error(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Raw("<html>proxy error</html>", content_type="text/html")])
    with LLMClient(config(scripted_llm)) as client, pytest.raises(LLMError, match="non-JSON"):
        client.chat(QUESTION)


# ---------------------------------------------------------------- cache


def test_cache_hit_makes_no_request(scripted_llm: ScriptedLLM, tmp_path: Path) -> None:
    scripted_llm.script(
        [
            Reply(
                tool_calls=[Call("search", {"query": "polonium"})], input_tokens=40, output_tokens=9
            )
        ]
    )
    cfg = config(scripted_llm, cache_dir=tmp_path / "cache")
    with LLMClient(cfg) as client:
        first = client.chat(QUESTION, tools=[SEARCH])
        second = client.chat(QUESTION, tools=[SEARCH])
        totals = client.totals
    with LLMClient(cfg) as other:  # the cache outlives the client
        third = other.chat(QUESTION, tools=[SEARCH])

    assert len(scripted_llm.requests) == 1
    assert first.usage.cached is False
    assert second.usage.cached is True and third.usage.cached is True
    assert second.tool_calls == first.tool_calls == third.tool_calls
    assert second.usage.input_tokens == 40
    assert (totals.llm_calls, totals.cached_calls) == (2, 1)
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert len(files) == 1 and not files[0].name.startswith(".tmp-")


def test_cache_misses_when_the_request_differs(scripted_llm: ScriptedLLM, tmp_path: Path) -> None:
    scripted_llm.script([Reply("a"), Reply("b"), Reply("c")])
    with LLMClient(config(scripted_llm, cache_dir=tmp_path)) as client:
        assert client.chat(QUESTION).text == "a"
        assert client.chat(QUESTION, tools=[SEARCH]).text == "b"
        assert client.chat([*QUESTION, Message.user("And radium?")]).text == "c"
    assert len(scripted_llm.requests) == 3


# ---------------------------------------------------------------- budgets


def test_call_budget_refuses_without_a_request(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply("1"), Reply("2"), Reply("3")])
    budget = Budget(max_calls=2)
    with LLMClient(config(scripted_llm), budget=budget) as client:
        client.chat(QUESTION)
        client.chat(QUESTION)
        with pytest.raises(BudgetExceeded, match="2 of 2 calls"):
            client.chat(QUESTION)
    assert len(scripted_llm.requests) == 2


def test_token_budget_counts_reply_usage(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply("1", input_tokens=15, output_tokens=10), Reply("2")])
    budget = Budget(max_tokens=20)
    with LLMClient(config(scripted_llm)) as client:
        client.chat(QUESTION, budget=budget)
        assert budget.exceeded() == "LLM token budget used up (25 of 20 tokens)"
        with pytest.raises(BudgetExceeded):
            client.chat(QUESTION, budget=budget)
    assert len(scripted_llm.requests) == 1


def test_time_budget_uses_its_clock() -> None:
    now = [100.0]
    budget = Budget(max_seconds=30, clock=lambda: now[0])
    assert budget.exceeded() is None
    now[0] = 131.0
    assert budget.exceeded() == "LLM time budget used up (31.0 of 30 s)"
    budget.charge(LLMUsage(input_tokens=3, output_tokens=4))
    assert (budget.calls, budget.tokens) == (1, 7)


# ---------------------------------------------------------------- structured output


class Answer(BaseModel):
    sparql: str
    confidence: float


def test_chat_json_uses_json_schema_and_validates(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply('{"sparql": "SELECT ?x WHERE { ?x ?p ?o }", "confidence": 0.75}')])
    with LLMClient(config(scripted_llm)) as client:
        result = client.chat_json(QUESTION, Answer)
    assert result.value == Answer(sparql="SELECT ?x WHERE { ?x ?p ?o }", confidence=0.75)
    assert result.reply.usage.input_tokens == 10
    body = scripted_llm.requests[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Answer"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["sparql", "confidence"]
    assert "JSON Schema" in body["messages"][0]["content"]


def test_chat_json_rejects_garbage(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply("I believe the answer is 42."), Reply('{"sparql": "ASK {}"}')])
    with LLMClient(config(scripted_llm)) as client:
        with pytest.raises(LLMOutputError, match="expected a JSON object for Answer"):
            client.chat_json(QUESTION, Answer)
        with pytest.raises(
            LLMOutputError, match="does not match Answer: confidence: Field required"
        ):
            client.chat_json(QUESTION, Answer)


def test_chat_json_falls_back_to_text_when_response_format_is_refused(
    scripted_llm: ScriptedLLM,
) -> None:
    fenced = 'Here it is:\n```json\n{"sparql": "ASK {}", "confidence": 1}\n```'
    scripted_llm.script([Error(400, "response_format not supported"), Reply(fenced), Reply(fenced)])
    with LLMClient(config(scripted_llm)) as client:
        first = client.chat_json(QUESTION, Answer)
        second = client.chat_json(QUESTION, Answer)
    assert first.value == second.value == Answer(sparql="ASK {}", confidence=1)
    assert ["response_format" in body for body in scripted_llm.requests] == [True, False, False]


def test_chat_json_repair_sends_the_error_back(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply('{"sparql": 5}'), Reply('{"sparql": "ASK {}", "confidence": 0.5}')])
    with LLMClient(config(scripted_llm)) as client:
        result = client.chat_json(QUESTION, Answer, repairs=1)
    assert result.value.confidence == 0.5
    feedback = scripted_llm.requests[1]["messages"][-1]
    assert feedback["role"] == "user"
    assert "does not match Answer" in feedback["content"]


def test_extract_json_object_finds_the_first_object() -> None:
    assert extract_json_object('noise [1] then {"a": {"b": 2}} and {"c": 3}') == {"a": {"b": 2}}
    assert extract_json_object("no json here {oops") is None


# ---------------------------------------------------------------- configuration


def llm_from_env(env: dict[str, str], model: str | None = None) -> LLMConfig | None:
    return Settings.from_env(env, overrides={"SPARQLNAV_LLM_MODEL": model}).llm


def test_from_env_is_none_when_unconfigured() -> None:
    assert llm_from_env({}) is None
    assert llm_from_env({"SPARQLNAV_LLM_MODEL": "m"}) is None  # would hit api.openai.com keyless
    assert llm_from_env({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}) is None


def test_from_env_reads_variables_and_overrides(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input": 0.5, "output": 1.5}}))
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1",
        "OPENAI_API_KEY": "k",
        "SPARQLNAV_LLM_MODEL": "m",
        "SPARQLNAV_LLM_TOOL_MODE": "react",
        "SPARQLNAV_LLM_CACHE": str(tmp_path / "cache"),
        "SPARQLNAV_LLM_PRICES": str(prices),
    }
    cfg = llm_from_env(env)
    assert cfg is not None
    assert (cfg.base_url, cfg.model, cfg.tool_mode) == ("http://127.0.0.1:8000/v1", "m", "react")
    assert cfg.api_key is not None and cfg.api_key.get_secret_value() == "k"
    assert "k" not in repr(cfg.api_key)
    assert cfg.cache_dir == tmp_path / "cache"
    assert cfg.price() == ModelPrice(input=0.5, output=1.5)
    assert (cfg.timeout_s, cfg.max_retries) == (120.0, 4)

    chosen = llm_from_env(env, model="other")
    assert chosen is not None and chosen.model == "other" and chosen.timeout_s == 120.0
    assert llm_from_env({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, model="other") is not None
    with pytest.raises(ValueError, match="SPARQLNAV_LLM_TOOL_MODE"):
        llm_from_env({**env, "SPARQLNAV_LLM_TOOL_MODE": "telepathy"})
    prices.write_text("{not json")
    with pytest.raises(ValueError, match="SPARQLNAV_LLM_PRICES: cannot read LLM price table"):
        llm_from_env(env)


def test_keyless_local_server_works(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([Reply("hi")])
    cfg = llm_from_env({"OPENAI_BASE_URL": scripted_llm.base_url, "SPARQLNAV_LLM_MODEL": "local"})
    assert cfg is not None
    with LLMClient(cfg) as client:
        assert client.chat([Message.user("hello")]).text == "hi"
    assert scripted_llm.requests[0]["model"] == "local"


# ---------------------------------------------------------------- the scripted server itself


def test_scripted_server_lists_models_and_computes_replies(scripted_llm: ScriptedLLM) -> None:
    models = httpx.get(f"{scripted_llm.base_url}/models", timeout=5).json()
    assert models["data"][0]["id"] == "scripted-model"

    def echo(body: dict[str, Any]) -> Reply:
        return Reply(f"you said: {body['messages'][-1]['content']}")

    scripted_llm.script([echo])
    with LLMClient(config(scripted_llm)) as client:
        assert client.chat([Message.user("ping")]).text == "you said: ping"
        with pytest.raises(LLMError, match="script exhausted"):
            client.chat([Message.user("again")])
    assert scripted_llm.problems and "exhausted" in scripted_llm.problems[0]


def test_react_accepts_raw_newlines_inside_json_strings() -> None:
    text = 'Action: search({"query": "SELECT ?x WHERE {\n  ?x ?p ?o\n}"})\nObservation: invented'
    [call] = parse_react(text, [SEARCH])
    assert call.parse_error is None
    assert call.arguments == {"query": "SELECT ?x WHERE {\n  ?x ?p ?o\n}"}


def test_malformed_react_action_keeps_everything_after_the_parenthesis() -> None:
    [call] = parse_react('Action: search({"query": "polo)', [SEARCH])
    assert call.raw_arguments == '{"query": "polo)'
    assert call.parse_error is not None and "not valid JSON" in call.parse_error
