"""What is remembered: the SQLite store (database.py: `Store`, one connection made of one class per kind of record,
in messages.py, attachments.py, proposals.py, tasks.py, audit.py, usage.py and outbox.py), its migrations, the
other tables' classes on the same connection (conversations, schedules, GitHub, shown buttons, standing notes, base
runs, the repo map's code index), what the chat was shown, and the delivery of the outbox. Imports only agents.core."""
