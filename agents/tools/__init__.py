"""What a model's tool call does: the toolbox and the tool sets, workspaces and path confinement, file tools
and the one walker, the sandbox and shell, the one git runner, screenshots, attachments, the network gate."""
