"""Routes that answer questions: `/api/ask`, its live stream `/api/ask/stream`, and the TEXT2SPARQL API.

Strategies are synchronous (LLM and SPARQL calls block), so each run happens in a worker thread; its trace
events cross into the event loop with `call_soon_threadsafe` and leave as server-sent events.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field

from sparqlnav.answer import Answer
from sparqlnav.context import RunContext
from sparqlnav.conversation import (
    Conversation,
    ConversationError,
    ConversationNotFound,
    ConversationRefused,
    edit_turn,
)
from sparqlnav.faces.access import presented_token
from sparqlnav.faces.limits import shown
from sparqlnav.faces.service import Job, Service, json_response, one_line, run_failure
from sparqlnav.faces.steps import steps_summary
from sparqlnav.graph.kg import KGError
from sparqlnav.strategies.machine import MachineShape
from sparqlnav.trace import Event

PING_S = 15.0  # keep-alive comment on quiet streams so proxies do not cut them
STOPPING = "this server process is stopping and its run was stopped; ask again (the conversation is kept)"


class AskRequest(BaseModel):
    """A question for the KG."""

    question: str = Field(description="The question, in plain language.", examples=["Who manages Heinrich Hoch?"])
    kg: str | None = Field(default=None, description="A KG name this server offers (default: the first).")
    strategy: str | None = Field(default=None, description="lexical, explore, … or auto (default: the server's).")
    conversation: str | None = Field(
        default=None,
        description="The id of the conversation this question follows up (from an earlier answer's `conversation`); "
        "absent: a new conversation is started.",
    )
    refine: int | None = Field(
        default=None, ge=1, description="The number of an earlier turn this question refines (default: all before)."
    )
    sparql: str | None = Field(
        default=None, description="The user's own edit of the last query, kept as a turn the question builds on."
    )


def owner_of(token: str) -> str:
    """Who owns a conversation started with this bearer token: a digest, so the token is never kept."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:32]


def request_owner(service: Service, request: Request) -> str | None:
    """The client's owner id when auth is on (the guard has checked the token), else None."""
    if not service.config.token:
        return None
    token = presented_token(request.headers.get("authorization", ""))
    return owner_of(token) if token is not None else None


def _conversation(service: Service, body: AskRequest, request: Request) -> tuple[Conversation, RunContext]:
    """The conversation the question belongs to (created when the body names none) with the user's edit recorded,
    and the context of the question; HTTP 404, 403 or 422 when it cannot be used as asked."""
    store = service.conversations
    owner = request_owner(service, request)
    try:
        edit = service.check_query(body.sparql, "sparql") if body.sparql and body.sparql.strip() else None
        # A new conversation is kept with its first turn: a request refused here keeps nothing (issue 39).
        client = getattr(request.state, "client", None)
        talk = store.get(body.conversation, owner) if body.conversation else store.begin(owner, client)
        context = talk.context(body.refine)  # checked before the edit is kept
        if edit is not None:
            store.add_turn(talk, edit_turn(edit))
            context = talk.context(body.refine)
    except ConversationNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except ConversationRefused as exc:
        raise HTTPException(403, str(exc)) from None
    except ConversationError as exc:
        raise HTTPException(422, str(exc)) from None
    return talk, context


def answer_object(answer: Answer) -> dict[str, Any]:
    """The `ask --json` object, with `steps` (how many queries ran, which one gave the answer), the conversation's id
    and the turn's number at the top when there is one (and `conversation_note` when its oldest turns were dropped to
    keep it within its bounds)."""
    data = answer.to_json()
    data["steps"] = steps_summary(answer).to_json()  # the UI's Steps line says which query answered from this
    talk = answer.extra.get("conversation")
    if talk is not None:
        data["conversation"], data["turn"] = talk["id"], talk["turn"]
        if talk.get("note"):
            data["conversation_note"] = talk["note"]
    return data


def ask_routes(service: Service) -> APIRouter:
    """`/api/ask`, `/api/ask/stream` and `/text2sparql` over `service`."""
    router = APIRouter()
    config, pool = service.config, service.pool

    @router.post("/api/ask", tags=["ask"])
    async def ask(body: AskRequest, request: Request) -> Response:
        """Answer a question: the `ask --json` object (question, strategy, sparql, results, answer, trace, usage)
        plus `conversation` (its id, for follow-ups) and `turn` (the question's number in it)."""
        question = service.check_question(body.question)
        kg_name = service.kg(body.kg)
        _, strategy = service.strategy(body.strategy)
        talk, context = await asyncio.to_thread(_conversation, service, body, request)  # Redis, perhaps
        job = service.start(question, kg_name, strategy, conversation=talk, context=context)
        answer = await service.finish(job)
        return json_response(answer_object(answer))

    @router.post(
        "/api/ask/stream",
        tags=["ask"],
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "`trace` events, then one `answer` (or `error`)."}},
    )
    async def ask_stream(body: AskRequest, request: Request) -> StreamingResponse:
        """The same run as server-sent events: `event: trace` for each step as it happens, then `event: answer`
        with the answer object of `/api/ask` (or `event: error` with `{status, detail}`)."""
        question = service.check_question(body.question)
        kg_name = service.kg(body.kg)
        _, strategy = service.strategy(body.strategy)
        talk, context = await asyncio.to_thread(_conversation, service, body, request)  # Redis, perhaps
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def forward(event: Event) -> None:  # runs in the worker thread
            loop.call_soon_threadsafe(queue.put_nowait, ("trace", event.to_json()))

        job = service.start(question, kg_name, strategy, listeners=[forward], conversation=talk, context=context)
        service.streams.add(queue)
        # Queued after every event the worker forwarded, so the answer always comes last.
        job.future.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, ("done", None)))
        return StreamingResponse(
            _stream(service, job, queue, loop),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @router.get("/text2sparql", tags=["text2sparql"])
    async def text2sparql(
        question: str = Query(description="The question."),
        dataset: str = Query(description="The dataset id, e.g. https://text2sparql.aksw.org/2025/corporate/"),
    ) -> dict[str, str]:
        """The TEXT2SPARQL challenge API: the SPARQL query that answers `question` over `dataset`."""
        text = service.check_question(question)
        if config.datasets:
            if dataset not in config.datasets:
                raise HTTPException(404, f"unknown dataset {shown(dataset)}: this server answers for {', '.join(config.datasets)}")
            kg_name = service.kg(config.datasets[dataset])
        elif len(pool.names()) == 1:
            kg_name = pool.default
        elif dataset in pool.names():
            kg_name = dataset
        else:
            raise HTTPException(404, f"unknown dataset {shown(dataset)}: name one of {', '.join(pool.names())}")
        _, strategy = service.strategy(config.text2sparql_strategy or config.strategy)
        # The challenge compares flat sets of values: label columns beside their entities would count as wrong.
        job = service.start(text, kg_name, MachineShape(strategy))
        answer = await service.finish(job)
        # The challenge scores a query for every question: when the strategy was not sure enough to answer,
        # its best guess (kept aside as such in the answer) is the query submitted.
        guess = answer.extra.get("best_guess") or {}
        return {"dataset": dataset, "question": question, "query": answer.sparql or guess.get("sparql") or ""}

    return router


def _sse(event: str, data: Any, ident: int | None = None) -> str:
    """One server-sent event; the JSON payload has no raw newlines, so one data line suffices."""
    head = f"event: {event}\n" + (f"id: {ident}\n" if ident is not None else "")
    return head + "data: " + json.dumps(data, ensure_ascii=False, default=str) + "\n\n"


async def _stream(
    service: Service, job: Job, queue: asyncio.Queue[tuple[str, Any]], loop: asyncio.AbstractEventLoop
) -> AsyncIterator[str]:
    """Trace events as they happen, then the answer; a quiet stream gets keep-alive comments."""
    deadline = loop.time() + service.config.request_timeout_s
    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                job.cancel()
                limit = service.config.request_timeout_s
                yield _sse("error", {"status": 504, "detail": f"no answer within the time limit of {limit:g} s"})
                return
            try:
                kind, payload = await asyncio.wait_for(queue.get(), min(remaining, PING_S))
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if kind == "trace":
                yield _sse("trace", payload, payload.get("seq"))
                continue
            if kind == "stopping":
                job.cancel()
                yield _sse("error", {"status": 503, "detail": STOPPING})
                return
            exc = job.future.exception()
            if exc is None:
                yield _sse("answer", answer_object(job.future.result()))
            elif isinstance(exc, KGError):
                yield _sse("error", {"status": 503, "detail": one_line(exc)})
            elif isinstance(exc, Exception):
                failure = run_failure(exc)
                yield _sse("error", {"status": failure.status_code, "detail": failure.detail})
            else:
                yield _sse("error", {"status": 499, "detail": "the run was cancelled"})
            return
    finally:
        service.streams.discard(queue)
        job.cancel()  # the client went away or the stream ended: stop the run at its next step
