"""The strategies' prompt templates, one Markdown file each, written for this project."""

from __future__ import annotations

from importlib import resources


def prompt_text(name: str) -> str:
    """The text of one prompt template (`name` is its file name, e.g. `explore_policy.md`)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
