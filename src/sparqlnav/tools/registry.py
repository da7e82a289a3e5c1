"""One declaration per tool, smolagents-style: a typed function `fn(toolkit, <parameters>, *, <hooks>)` whose
name is the tool's name, whose docstring is its description and whose parameters, each `Annotated` with a
pydantic `Field(description=...)`, are its arguments. Strategies (as LLM tool specs), the MCP server and the
HTTP API all list and call tools from a `Registry`, so names, descriptions and arguments agree everywhere.

Keyword-only parameters are hooks: callers may pass them (explore's entity pruning), models never see them.
Tool and argument names are a contract (docs/design.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import Field, TypeAdapter
from pydantic.fields import FieldInfo

from sparqlnav.llm import ToolSpec
from sparqlnav.tools.lookup import EntityPage
from sparqlnav.tools.toolkit import Observation, Toolkit


@dataclass(frozen=True)
class Param:
    """One argument of a tool: its name, its `Annotated[type, Field(description=...)]` and its default."""

    name: str
    annotation: Any
    default: Any = inspect.Parameter.empty

    @property
    def required(self) -> bool:
        """Whether a call must give it."""
        return self.default is inspect.Parameter.empty

    @property
    def description(self) -> str:
        """What the argument means."""
        return next(m.description or "" for m in get_args(self.annotation)[1:] if isinstance(m, FieldInfo))

    def schema(self) -> dict[str, Any]:
        """The argument's JSON schema (with its description; pydantic's titles left out)."""
        out = TypeAdapter(self.annotation).json_schema()
        out.pop("title", None)
        if not self.required and self.default is not None:
            out["default"] = self.default
        return out


@dataclass(frozen=True)
class Tool:
    """A declared tool: what models and clients see (name, description, parameters) and the function."""

    name: str
    description: str
    params: tuple[Param, ...]
    hooks: frozenset[str]
    fn: Callable[..., Observation]

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments object."""
        out: dict[str, Any] = {"type": "object", "properties": {p.name: p.schema() for p in self.params}}
        required = [p.name for p in self.params if p.required]
        if required:
            out["required"] = required
        return out

    def spec(self) -> ToolSpec:
        """The tool as an LLM sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters())

    def signature(self, *extra: inspect.Parameter) -> inspect.Signature:
        """A Python signature of the arguments (plus `extra` ones a face adds), for faces that build functions."""
        params = [
            inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=p.annotation, default=p.default)
            for p in self.params
        ]
        return inspect.Signature([*params, *extra], return_annotation=str)

    def __call__(self, toolkit: Toolkit, arguments: Mapping[str, Any], **hooks: Any) -> Observation:
        """Run on `toolkit` with the model's or client's `arguments`; hooks the tool does not take are not passed."""
        known = {p.name for p in self.params}
        unknown = set(arguments) - known
        if unknown:
            return Observation(f"{self.name} takes no argument {', '.join(sorted(unknown))}", None, ok=False)
        missing = [p.name for p in self.params if p.required and p.name not in arguments]
        if missing:
            return Observation(f"{self.name} needs {', '.join(missing)}", None, ok=False)
        given = {k: v for k, v in hooks.items() if k in self.hooks}
        return self.fn(toolkit, **arguments, **given)


def tool(fn: Callable[..., Observation]) -> Tool:
    """Declare the tool `fn(toolkit, <Annotated parameters>, *, <hooks>)`; its docstring is the description."""
    sig = inspect.signature(fn, eval_str=True)
    _toolkit, *rest = sig.parameters.values()
    params: list[Param] = []
    hooks: set[str] = set()
    for p in rest:
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            hooks.add(p.name)
            continue
        described = get_origin(p.annotation) is Annotated and any(
            isinstance(m, FieldInfo) and m.description for m in get_args(p.annotation)[1:]
        )
        if not described:
            raise TypeError(f"{fn.__name__}({p.name}): annotate it as Annotated[type, Field(description=...)]")
        params.append(Param(p.name, p.annotation, p.default))
    doc = " ".join((inspect.getdoc(fn) or "").split())
    if not doc:
        raise TypeError(f"{fn.__name__}: a tool needs a docstring (its description)")
    return Tool(fn.__name__, doc, tuple(params), frozenset(hooks), fn)


class Registry:
    """Tools by name, in declaration order (the order models and clients see them)."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            if t.name in self._tools:
                raise ValueError(f"two tools are called {t.name!r}")
            self._tools[t.name] = t

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def names(self) -> list[str]:
        """The tools' names, in order."""
        return list(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools as an LLM sees them."""
        return tuple(t.spec() for t in self)

    def only(self, *names: str) -> Registry:
        """The named tools (in the order given)."""
        return Registry(self._tools[n] for n in names)

    def plus(self, *tools: Tool) -> Registry:
        """These tools and more."""
        return Registry([*self, *tools])

    def call(self, name: str, toolkit: Toolkit, arguments: Mapping[str, Any], **hooks: Any) -> Observation:
        """Run the tool called `name` (a failed observation when there is none)."""
        found = self._tools.get(name)
        if found is None:
            return Observation(f"there is no tool {name!r}; the tools are {', '.join(self._tools)}", None, ok=False)
        return found(toolkit, arguments, **hooks)


# -- the toolkit's tools ------------------------------------------------------------------------------

Id = Annotated[str, Field(description="a prefixed name or <IRI> (as observations show them), or a Q/P id on Wikidata-shaped graphs")]
Query = Annotated[str, Field(description="the SPARQL query")]


def search(kit: Toolkit, query: Annotated[str, Field(description="words to look for, e.g. a name")]) -> Observation:
    """Find entities, classes and properties whose label, alias or description matches a text (typos tolerated).
    Returns up to 8 entities and 4 properties with their identifiers."""
    return kit.search(query)


def get_entity(kit: Toolkit, id: Id, *, prune: Callable[[EntityPage], EntityPage] | None = None) -> Observation:
    """Show one entity: each property with its values (and statement qualifiers where the graph has them), and the
    properties that point at it, with counts and examples."""
    return kit.get_entity(id, prune=prune)


def get_property_examples(kit: Toolkit, id: Id) -> Observation:
    """Show a few subject-object pairs that use a property, to see how it is used and in which direction."""
    return kit.get_property_examples(id)


def execute_sparql(kit: Toolkit, query: Query) -> Observation:
    """Run a read-only SPARQL query on the graph under a time limit. Shows the rows (the first and last ones when
    there are many), the boolean of an ASK, or the engine's error message."""
    return kit.execute_sparql(query)


def find_examples(
    kit: Toolkit,
    question: Annotated[str, Field(description="a question in plain language")],
    k: Annotated[int, Field(description="how many examples (1 to 20)")] = 5,
) -> Observation:
    """Example question–query pairs whose questions resemble `question` (from the KG's own examples and any
    added with `sparqlnav index`)."""
    return kit.find_examples(question, k)


def get_class_shapes(
    kit: Toolkit,
    classes: Annotated[list[str], Field(description="IRIs, prefixed names or words naming classes")],
) -> Observation:
    """The shapes of classes (ShEx-like: each property with the classes or datatypes of its values, most used
    first)."""
    return kit.get_class_shapes(classes)


def validate_sparql(kit: Toolkit, query: Query) -> Observation:
    """Check a SPARQL query without running it: syntax, prefixes (missing ones repaired), classes and predicates
    against the KG's schema; lists the issues with hints."""
    return kit.validate_sparql(query)


TOOLKIT_TOOLS = Registry(
    tool(fn)
    for fn in (
        search,
        get_entity,
        get_property_examples,
        execute_sparql,
        find_examples,
        get_class_shapes,
        validate_sparql,
    )
)
"""Every tool of the toolkit; strategies offer a subset (`only`), faces offer them all."""
