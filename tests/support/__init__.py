"""Helpers shared by the test modules: a test module imports from here (or `tests.conftest`, `tests.fakes`,
`tests.scripted`), never from another test module (`tests/test_layers.py` checks it).

- `tasks`: a task through the real bot: the orchestrator's `start_task` reply, waiting for a task to end, its summary,
  what the worker was sent back, the worker's edits;
- `processes`: host processes and sockets: pids by argument, a counting TCP listener, the bot as a real process;
- `sandbox`: the secrets a hostile worker looks for, planted where a real bot keeps them (its process environment
  too), and the bwrap mark;
- `temporal`: TASK_ENGINE=temporal: the dev server, `agentlab runner` processes, the bot on that engine;
- `questions`: the owner asked about the network or an MCP call, and the demo MCP server;
- `attachments`: files sent to the chat (a minimal PDF, one with compressed pages, a decompression bomb);
- `api_limits`: a model with the Messages API's limits on a request's tokens and bytes;
- `schedules`: schedules made in words;
- `git_repos`: repositories made by a user with no git identity;
- `github`: a workspace on the fake GitHub, a flow's transcript, a git host that is not GitHub;
- `notifiers`: a strict chat for a part tested on its own (any message it sends fails the test);
- `held_git`: a `git` that holds one subcommand of the bot's, to SIGKILL the bot exactly there.
"""
