"""TASK_ENGINE=temporal: tasks as Temporal workflows, executed by `agentlab runner` processes anywhere.

payloads.py (what travels, and is stored by Temporal) · workflow.py (the task's workflow) · cluster.py (connecting,
queue names, live runners) · front.py (the bot's side: start, cancel, steer, progress into the chat) ·
runner.py (the runner process: the existing TaskExecutor on its own workspaces and API key).
"""
