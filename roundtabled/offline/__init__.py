"""Test and demo infrastructure: a scripted OpenAI-compatible LLM and a private `opencode serve`."""
