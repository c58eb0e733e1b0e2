"""Requests from outside the chat: work asked for on GitHub (an issue or comment that mentions the bot, a review on
its pull request), handled as the asker's own message to the orchestrator or as a continuation of a task.

It stands above the crew and the conversation it drives (agents/work, agents/chat), where agents/github (GitHub's
API client and webhook, which the work layer's pull requests use) cannot: that folder is below them.
"""
