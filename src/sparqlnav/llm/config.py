"""Which model to use and how to talk to it (`LLMConfig`), and what its tokens cost (`ModelPrice`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from sparqlnav.llm.errors import one_line

ToolMode = Literal["native", "react"]


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
        raise ValueError(f"cannot read LLM price table {path}: {one_line(str(exc))}") from exc

