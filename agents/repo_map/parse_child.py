"""The parse process of parse_pool.py: `python -m agents.repo_map.parse_child` reads (root, paths, states, hashes)
pickled on stdin and writes the outlines back on stdout in frames (a length, then a pickle of (path, outline) pairs).

It runs at a lower priority (nice 10). A module of its own so the child imports only what parsing needs (no asyncio,
no tree-sitter grammars until a JavaScript file comes): each process of a big build starts sooner and holds less
memory.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import sys
from pathlib import Path

from agents.repo_map.outline import parse_files

FRAME_FILES = 50  # files per frame written back (the first ones are stored soon; fewer, bigger writes after)
LENGTH = struct.Struct(">Q")
# A parse process yields the CPU to the bot (its map renders, its replies) when both want it, and takes it all
# when the bot is idle: on 2 cores a task's map drawn mid-build was up to twice as slow without it.
CHILD_NICENESS = 10


def main() -> None:
    with contextlib.suppress(OSError, AttributeError):  # background work: the bot's own threads come first
        os.nice(CHILD_NICENESS)
    root, paths, states, hashes = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer
    for begin in range(0, len(paths), FRAME_FILES):
        chunk = paths[begin : begin + FRAME_FILES]
        frame = pickle.dumps(list(zip(chunk, parse_files(Path(root), chunk, states, hashes))), pickle.HIGHEST_PROTOCOL)
        out.write(LENGTH.pack(len(frame)) + frame)
        out.flush()


if __name__ == "__main__":
    main()
