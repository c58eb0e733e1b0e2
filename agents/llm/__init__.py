"""Talking to Claude: the client and its error wording, the one tool loop (orchestrator and workers), the
context window budget, the prompts, token usage and the scripted model for unit tests."""
