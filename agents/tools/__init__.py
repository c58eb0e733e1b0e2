"""What a model's tool call does: the toolbox and the tool sets, file tools, screenshots, the browser, MCP servers,
the desk tools. Workspace folders, confinement and the file walk live in `agents.workspaces`."""
