"""The repository map: outlines of source files (Python by ast, JS/TS by tree-sitter), a ranking of
files by the definition/reference graph, and a token-bounded map built from the store's index."""
