"""Which state store a server uses: Redis when SPARQLNAV_STATE_URL names one, else the process's own memory. Apart
from `faces.state` so that the Redis store, which builds on that module's protocol, is not imported by it."""

from __future__ import annotations

from sparqlnav.faces.state import LocalState, StateStore
from sparqlnav.settings import Settings

__all__ = ["open_state"]


def open_state(settings: Settings) -> StateStore:
    """The state store the settings name: Redis for SPARQLNAV_STATE_URL (checked now: StateUnavailable in one line
    when it cannot be reached), else this process's memory."""
    url = settings.serve.state_url
    if url is None:
        return LocalState()
    from sparqlnav.faces.redis_state import RedisState  # redis-py only when a Redis is named

    return RedisState.connect(url.get_secret_value())
