"""What is remembered: the SQLite store (database.py), its migrations, the repo map's code index, what the
chat was shown, and the outbox of messages that must reach the chat. Imports only agents.core."""
