"""The strategies' prompt templates, one Markdown file each, written for this project."""

from __future__ import annotations

from importlib import resources

# Rules more than one prompt states, written once so the prompts cannot disagree (`$ties` in a template).
SHARED = {"$ties": "rule_ties.md"}


def prompt_text(name: str) -> str:
    """The text of one prompt template (`name` is its file name, e.g. `explore_policy.md`), shared rules put in."""
    text = _read(name)
    for mark, shared in SHARED.items():
        if mark in text:
            text = text.replace(mark, " ".join(_read(shared).split()))
    return text


def _read(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
