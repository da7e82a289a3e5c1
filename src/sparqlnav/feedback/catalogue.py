"""The guideline catalogue: `Guideline` (one entry: where its trouble comes from, when it is checked, its text),
read from the one YAML file (`feedback/guidelines.yaml`) and rendered for the model."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

Source = Literal["engine", "interpreter", "memory"]
Stage = Literal["before", "after"]
Details = Mapping[str, object]


@dataclass(frozen=True)
class Guideline:
    """One catalogue entry; after `render` its text carries the details of this occurrence."""

    id: str
    source: Source
    stage: Stage
    blocks: bool
    trigger: str
    text: str
    details: Mapping[str, str] = field(default_factory=dict)

    def render(self, details: Details) -> Guideline:
        """A copy whose text has its {placeholders} filled (unknown ones are left as they are)."""
        shown = {k: str(v) for k, v in details.items()}
        return replace(self, text=self.text.format_map(_Keep(shown)), details=shown)

    def to_json(self) -> dict[str, Any]:
        """Plain data (for traces)."""
        return {"id": self.id, "source": self.source, "text": self.text}


class _Keep(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def default_catalogue_path() -> Path:
    """The bundled catalogue file."""
    return Path(str(resources.files(__package__) / "guidelines.yaml"))


def load_catalogue(path: Path | None = None) -> dict[str, Guideline]:
    """Read a guideline catalogue (YAML list of id/source/stage/blocks/trigger/text), in file order."""
    path = path or default_catalogue_path()
    return dict(_parse_catalogue(path, path.read_text(encoding="utf-8")))


@functools.lru_cache(maxsize=8)
def _parse_catalogue(path: Path, text: str) -> tuple[tuple[str, Guideline], ...]:
    # Cached on the text: parsing YAML costs ~20 ms, and every strategy instance loads the catalogue.
    raw = yaml.safe_load(text)
    if not isinstance(raw, list):
        raise ValueError(f"{path}: the catalogue must be a list of guidelines")
    out: dict[str, Guideline] = {}
    for entry in raw:
        try:
            g = Guideline(
                id=str(entry["id"]),
                source=entry["source"],
                stage=entry["stage"],
                blocks=bool(entry.get("blocks", False)),
                trigger=str(entry["trigger"]).strip(),
                text=" ".join(str(entry["text"]).split()),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: bad guideline entry {entry!r}: {exc}") from None
        if g.source not in ("engine", "interpreter", "memory") or g.stage not in (
            "before",
            "after",
        ):
            raise ValueError(f"{path}: guideline {g.id}: bad source or stage")
        if g.id in out:
            raise ValueError(f"{path}: guideline {g.id} is defined twice")
        out[g.id] = g
    return tuple(out.items())


# ---------------------------------------------------------------- memory


def render_guidelines(guidelines: Iterable[Guideline]) -> str:
    """Guidelines as text appended to an observation."""
    return "\n".join(f"Guideline ({g.id}): {g.text}" for g in guidelines)
