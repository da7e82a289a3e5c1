"""Talking to a model: the OpenAI-compatible client (native or text-ReAct tool calls, structured output, retries,
cache, budgets) and the types it speaks in. The public names, each from the module of its concept."""

from sparqlnav.llm.client import LLMClient
from sparqlnav.llm.config import LLMConfig, ModelPrice, ToolMode, load_prices
from sparqlnav.llm.errors import BudgetExceeded, LLMError, LLMOutputError
from sparqlnav.llm.jsonout import extract_json_object
from sparqlnav.llm.messages import LLMReply, LLMUsage, Message, StructuredReply, ToolCall, ToolSpec
from sparqlnav.llm.react import parse_react
from sparqlnav.llm.usage import (
    Budget,
    CallOutcome,
    CallRecord,
    Recorder,
    UsageTotals,
    trace_recorder,
)

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
    "ToolMode",
    "ToolSpec",
    "UsageTotals",
    "extract_json_object",
    "load_prices",
    "parse_react",
    "trace_recorder",
]
