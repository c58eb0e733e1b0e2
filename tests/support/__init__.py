"""Helpers shared by the test modules: a test module imports from here (or `tests.conftest`, `tests.fakes`,
`tests.scripted`), never from another test module (`tests/test_layers.py` checks it).

- `tasks`: a task through the real bot: the orchestrator's `start_task` reply, waiting for a task to end, its summary,
  what the worker was sent back, the worker's edits;
- `processes`: host processes and sockets: pids by argument, a counting TCP listener, the bot as a real process;
- `sandbox`: the secrets a hostile worker looks for, planted where a real bot keeps them (and the bwrap mark);
- `temporal`: TASK_ENGINE=temporal: the dev server, `agentlab runner` processes, the bot on that engine;
- `questions`: the owner asked about the network or an MCP call, and the demo MCP server;
- `attachments`: files sent to the chat (a minimal PDF, a decompression bomb);
- `schedules`: schedules made in words;
- `git_repos`: repositories made by a user with no git identity.
"""
