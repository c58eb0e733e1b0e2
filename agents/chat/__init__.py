"""The conversation: the orchestrator that answers or hands work to the crew, replies to the bot's own
messages, and symbol hints from the repo map."""
