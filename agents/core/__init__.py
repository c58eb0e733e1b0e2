"""The foundation: settings, the pydantic records, ids, button actions, text measures and the protocols
that cross layers (protocols.py). Imports nothing else of agentlab."""
