"""Run by the bot (its own Python, `-I -S`, no agentlab import) beside a command allowed the network: it joins the
command's user and network namespaces, where the bot's user holds every capability and the command none, and

- installs the nftables rules it is given (`--rules TEXT`: agents/sandbox/egress_rules.py) through libnftables
  (a child `nft` would lose those capabilities on exec);
- with `--forward SOCKET PORT`, listens on the namespace's 127.0.0.1:PORT and carries each connection to the bot's
  proxy at the unix socket SOCKET (domains mode: the proxy is the namespace's only way out);
- prints `ready` once both are in place, then waits for its stdin to close and prints, as one JSON line, the
  addresses the rules refused (`refused4`/`refused6` sets).

`setns` into a user namespace needs a single-threaded process: this script does it before anything else.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import re
import sys

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000


def join(pid: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, flag in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET)):
        fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY)
        try:
            if libc.setns(fd, flag) != 0:
                raise OSError(ctypes.get_errno(), f"cannot join the command's {kind} namespace")
        finally:
            os.close(fd)


class Nft:
    """libnftables, with its output and errors kept in buffers."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libnftables.so.1")
        lib.nft_ctx_new.restype = ctypes.c_void_p
        for name in ("nft_ctx_buffer_output", "nft_ctx_buffer_error"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        for name in ("nft_ctx_get_output_buffer", "nft_ctx_get_error_buffer"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
            getattr(lib, name).restype = ctypes.c_char_p
        self.lib = lib
        self.ctx = lib.nft_ctx_new(0)
        lib.nft_ctx_buffer_output(self.ctx)
        lib.nft_ctx_buffer_error(self.ctx)

    def run(self, text: str) -> str:
        if self.lib.nft_run_cmd_from_buffer(self.ctx, text.encode()) != 0:
            said = (self.lib.nft_ctx_get_error_buffer(self.ctx) or b"").decode(errors="replace")
            raise OSError(f"nft: {said.strip()[-500:]}")
        return (self.lib.nft_ctx_get_output_buffer(self.ctx) or b"").decode(errors="replace")

    def refused(self) -> list[str]:
        found: list[str] = []
        for v in (4, 6):
            with contextlib.suppress(OSError):
                listed = self.run(f"list set inet agentlab refused{v}")
                elements = re.search(r"elements = \{([^}]*)\}", listed, re.S)
                if elements:
                    found += [e.strip() for e in elements.group(1).split(",") if e.strip()]
        return found


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


async def serve(args: argparse.Namespace, nft: Nft | None) -> None:
    server = None
    if args.forward:
        socket_path, port = args.forward[0], int(args.forward[1])

        async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        server = await asyncio.start_server(forward, "127.0.0.1", port)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    if server is not None:
        server.close()
    print(json.dumps(nft.refused() if nft is not None else []), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pid")
    parser.add_argument("--rules", default="")
    parser.add_argument("--forward", nargs=2, metavar=("SOCKET", "PORT"))
    args = parser.parse_args()
    try:
        join(args.pid)
        nft = Nft() if args.rules else None
        if nft is not None:
            nft.run(args.rules)
    except OSError as err:
        print(f"error: {err}", flush=True)
        sys.exit(1)
    asyncio.run(serve(args, nft))


if __name__ == "__main__":
    main()
