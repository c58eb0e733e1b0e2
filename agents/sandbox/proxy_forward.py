"""Inside a task's sandbox: carry each TCP connection to 127.0.0.1:PORT to the bot's proxy socket (egress_proxy.py).

Run as a plain script by the sandbox's own `python3` (it imports nothing of agentlab): `proxy_forward.py SOCKET PORT`.
It ends with the sandbox (the browser's bwrap): it is a child of the same PID namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


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
