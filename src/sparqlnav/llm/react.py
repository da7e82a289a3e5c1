"""Tool calls as text (ReAct): the tools and the conversation rendered for a model without native tool calls,
and `Action: name({...})` read back from its reply."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from string import Template
from typing import Any

from sparqlnav.llm.jsonout import LENIENT_JSON, json_arguments
from sparqlnav.llm.messages import Message, ToolCall, ToolSpec

# Where the model's turn ends: what follows would be an observation it made up.
REACT_STOP = "\nObservation:"


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


def react_messages(
    messages: Sequence[Message], tools: Sequence[ToolSpec], template: str
) -> list[dict[str, Any]]:
    """The conversation as plain chat turns: the tools in the system prompt, calls as `Action:` lines."""
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



_JSON_NAMES = {"true": True, "false": False, "null": None}

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
        args, json_error = json_arguments(stripped)
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
            value, end = LENIENT_JSON.raw_decode(lead)
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

