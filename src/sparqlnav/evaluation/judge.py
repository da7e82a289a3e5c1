"""An LLM judge for free-text answers (SPAGHETTI §4's model match): does the answer say what the gold says?"""

from __future__ import annotations

from pydantic import BaseModel

from sparqlnav.llm import LLMClient, LLMConfig, Message, Recorder

JUDGE_PROMPT = """You grade answers to questions. You get a question, the reference answer and a candidate answer.
Decide whether the candidate gives the reference answer: the same entity, value or list, however it is worded
(another spelling, more detail, a full sentence all count). Extra information is fine unless it contradicts
the reference. A candidate that hedges between several answers, or says it does not know, does not match."""


class Verdict(BaseModel):
    """The judge's structured reply."""

    match: bool


class LLMJudge:
    """An `AnswerJudge` asking an OpenAI-compatible model; one client for many questions."""

    def __init__(self, llm: LLMConfig, *, record: Recorder | None = None) -> None:
        self.client = LLMClient(llm)
        self.record = record

    def __call__(self, question: str, gold: str, predicted: str) -> bool:
        """True when the model finds that `predicted` gives the `gold` answer to `question`."""
        user = f"Question: {question}\nReference answer: {gold}\nCandidate answer: {predicted}"
        reply = self.client.chat_json([Message.system(JUDGE_PROMPT), Message.user(user)], Verdict, repairs=1,
                                      purpose="judge", record=self.record)
        return reply.value.match

    def close(self) -> None:
        """Release the client."""
        self.client.close()
