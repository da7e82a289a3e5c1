"""The OpenAI-compatible LLM client: tool calls (native or text ReAct), structured output, retries, cache, budgets, usage."""
