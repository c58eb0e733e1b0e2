"""The parse process of parse_pool.py: `python -m agents.repo_map.parse_child` reads chunks of work on stdin, each a
frame (a length, then a pickle of (root, paths, states, hashes)), and answers each with a frame on stdout (a length,
then a pickle of its (path, outline) pairs, in the chunk's order); it exits when its stdin is closed.

Chunk by chunk rather than one share read at the start: the bot hands the next chunk to whichever process answered
(parse_pool.py), so a process slowed by other work on its core takes fewer and none waits idle at the end.

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

FRAME_FILES = 50  # most files per chunk, so per frame written back (the first ones are stored soon)
LENGTH = struct.Struct(">Q")


def main() -> None:
    source, out = sys.stdin.buffer, sys.stdout.buffer
    while header := source.read(LENGTH.size):
        if len(header) < LENGTH.size:
            raise EOFError("a chunk's length was cut short")
        (length,) = LENGTH.unpack(header)
        root, paths, states, hashes = pickle.loads(source.read(length))
        frame = pickle.dumps(list(zip(paths, parse_files(Path(root), paths, states, hashes))), pickle.HIGHEST_PROTOCOL)
        out.write(LENGTH.pack(len(frame)) + frame)
        out.flush()


if __name__ == "__main__":
    main()
