"""agentlab's core: the orchestrator, workers, tools and store (no Telegram imports).

Layers, bottom first (a folder is a layer; imports only point down and never round a circle, checked by
tests/test_layers.py): core → store → sandbox → git · inputs → workspaces → tools · github → llm · verify · repo_map →
work · chat → engine · review · inbound → the top (runtime, doctor) → evals.
"""
