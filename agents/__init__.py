"""agentlab: the orchestrator, workers, tools and store (no Telegram imports)."""
