"""Inside a task's sandbox: carry each TCP connection to 127.0.0.1:PORT to the bot's proxy socket (egress_proxy.py),
when the process that opened it belongs to this sandbox (the browser), and close it unanswered otherwise.

Run as a plain script by the sandbox's own `python3` (it imports nothing of agentlab): `proxy_forward.py SOCKET PORT`.
It ends with the sandbox (the browser's bwrap): it is a child of the same PID namespace.

Why the check: the port is on the loopback of the task's network namespace, which every command, service and MCP
server of the task shares (agents/sandbox/task_net.py). Without it a command never allowed the network would reach,
through this forwarder, every host the owner allowed the browser. Each of those runs in a PID namespace of its own,
so the socket that connected here is held by a process this sandbox's /proc shows only when it is the browser's: the
connection's row of /proc/net/tcp gives the client socket's inode, and one of this sandbox's processes must hold it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

LOOPBACK_HEX = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it


def client_socket_inode(client_port: int, port: int, table: str = "/proc/net/tcp") -> str | None:
    """The inode of the socket 127.0.0.1:client_port connected to 127.0.0.1:port (its row of `table`), or None."""
    want_local, want_remote = f"{LOOPBACK_HEX}:{client_port:04X}", f"{LOOPBACK_HEX}:{port:04X}"
    try:
        with open(table) as rows:
            next(rows, None)
            for row in rows:
                fields = row.split()
                if len(fields) > 9 and fields[1] == want_local and fields[2] == want_remote:
                    return fields[9]
    except OSError:
        return None
    return None


def held_here(inode: str, proc: str = "/proc") -> bool:
    """Whether a process this /proc shows (this sandbox's PID namespace) holds the socket `inode`."""
    target = f"socket:[{inode}]"
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"{proc}/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"{proc}/{pid}/fd/{fd}") == target:
                    return True
    return False


def from_this_sandbox(client_port: int, port: int) -> bool:
    inode = client_socket_inode(client_port, port)
    return inode is not None and inode != "0" and held_here(inode)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


async def main(socket_path: str, port: int) -> None:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        if not peer or not from_this_sandbox(int(peer[1]), port):
            writer.close()  # another process of the task (a command, a service): not the browser's way out
            return
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(forward, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
