"""agentlab: the Telegram side (a thin adapter over agents/)."""
