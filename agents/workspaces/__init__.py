"""Workspaces: the project folders under WORKSPACE_PATH (and `self`, the bot's own checkout), how they are found,
confined, created and walked, and the credential files in them whose values join the output filter."""
