"""The sandbox: every process a task starts runs confined (bubblewrap), bounded (cgroups, disk), and offline
unless the owner allows network (pasta) from the chat."""
