"""The parse process of parse_pool.py: `python -m agents.repo_map.parse_child` reads (root, paths, states, hashes)
pickled on stdin and writes the outlines back on stdout in frames (a length, then a pickle of (path, outline) pairs).

Its priority is set by the bot (parse_pool.py: nice 10 for a build in the background, the bot's own for one that
someone waits on). A module of its own so the child imports only what parsing needs (no asyncio,
no tree-sitter grammars until a JavaScript file comes): each process of a big build starts sooner and holds less
memory.
"""

from __future__ import annotations

import pickle
import struct
import sys
from pathlib import Path

from agents.repo_map.outline import parse_files

FRAME_FILES = 50  # files per frame written back (the first ones are stored soon; fewer, bigger writes after)
LENGTH = struct.Struct(">Q")


def main() -> None:
    root, paths, states, hashes = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer
    for begin in range(0, len(paths), FRAME_FILES):
        chunk = paths[begin : begin + FRAME_FILES]
        frame = pickle.dumps(list(zip(chunk, parse_files(Path(root), chunk, states, hashes))), pickle.HIGHEST_PROTOCOL)
        out.write(LENGTH.pack(len(frame)) + frame)
        out.flush()


if __name__ == "__main__":
    main()
