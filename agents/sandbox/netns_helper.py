"""Run by the bot (its own Python, `-I -S`, no agentlab import) beside a command allowed the network: it joins the
command's user and network namespaces, where the bot's user holds every capability and the command none, and

- installs the nftables rules it is given (`--rules TEXT`: agents/sandbox/egress_rules.py) through libnftables
  (a child `nft` would lose those capabilities on exec);
- with `--forward SOCKET PORT`, listens on the namespace's 127.0.0.1:PORT and carries each connection to the bot's
  proxy at the unix socket SOCKET (domains mode: the proxy is the namespace's only way out);
- prints `ready` once both are in place, then waits for its stdin to close and prints one line: `refused`, then
  the addresses the rules refused (`refused4`/`refused6` sets), separated by spaces.

It is started before the command's bwrap (its start-up overlaps bwrap's) and reads the sandbox's pid as the first
line of its stdin. `setns` into a user namespace needs a single-threaded process: it joins before starting any
thread. It imports as little as it can (no asyncio, json or re; the forwarder's modules only when it forwards): its
start-up is on every allowed command's path.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1): the user namespace that owns a namespace


def join(pid: str) -> None:
    """Join the user namespace that owns the command's network namespace (NS_GET_USERNS: as an unprivileged user,
    bwrap moves the command into a nested user namespace after setting up, where no capability over the network
    namespace is held), then the network namespace."""
    import fcntl

    libc = ctypes.CDLL(None, use_errno=True)
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        owner = fcntl.ioctl(net, NS_GET_USERNS)
        try:
            for fd, flag, kind in ((owner, CLONE_NEWUSER, "user"), (net, CLONE_NEWNET, "net")):
                if libc.setns(fd, flag) != 0:
                    raise OSError(ctypes.get_errno(), f"cannot join the command's {kind} namespace")
        finally:
            os.close(owner)
    finally:
        os.close(net)


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
            try:
                listed = self.run(f"list set inet agentlab refused{v}")
            except OSError:
                continue
            start = listed.find("elements = {")
            if start >= 0:
                inside = listed[start + len("elements = {") : listed.find("}", start)]
                found += [e.strip() for e in inside.replace("\n", " ").split(",") if e.strip()]
        return found


def start_forwarder(socket_path: str, port: int) -> None:
    """Listen on the namespace's loopback; carry each connection to the proxy's socket and back (threads)."""
    import socket
    import threading

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def carry(conn: socket.socket) -> None:
        with conn, socket.socket(socket.AF_UNIX) as up:
            try:
                up.connect(socket_path)
            except OSError:
                return
            back = threading.Thread(target=pipe, args=(up, conn), daemon=True)
            back.start()
            pipe(conn, up)
            back.join()

    def serve(server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=carry, args=(conn,), daemon=True).start()

    server = socket.socket()
    server.bind(("127.0.0.1", port))
    server.listen(128)
    threading.Thread(target=serve, args=(server,), daemon=True).start()


def main(args: list[str]) -> None:
    rules = args[args.index("--rules") + 1] if "--rules" in args else ""
    forwarding = args[args.index("--forward") + 1 : args.index("--forward") + 3] if "--forward" in args else []
    pid = sys.stdin.readline().strip()
    try:
        join(pid)
        nft = Nft() if rules else None
        if nft is not None:
            nft.run(rules)
        if forwarding:
            start_forwarder(forwarding[0], int(forwarding[1]))
    except (OSError, ValueError) as err:
        print(f"error: {err}", flush=True)
        sys.exit(1)
    print("ready", flush=True)
    sys.stdin.read()
    print(" ".join(["refused", *(nft.refused() if nft is not None else [])]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
