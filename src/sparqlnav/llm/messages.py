"""What goes to a model and what comes back: messages, tool specs and calls, replies and their usage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
M = TypeVar("M", bound=BaseModel)


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

