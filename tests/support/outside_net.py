"""A machine's neighbourhood made for a network test, whatever the machine (root only): a network namespace playing
the outside (a public host, a machine of the local network, a cloud-metadata address) behind a veth pair, and extra
addresses of the host itself on its end (a public one and a private one), as docker0, a VPN or a floating IP give a
developer's machine.

Each address serves a greeting on PORT (`HELLO <address>`, after reading what the client sent first, so a plain
HTTP request gets it as the answer). Addresses are drawn at random per use, so parallel test processes do not meet.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

PORT = 8087
SERVER = r"""
import socket, sys, threading
def serve(conn):
    conn.settimeout(0.5)
    try:
        conn.recv(65536)
    except OSError:
        pass
    here = conn.getsockname()[0]
    body = f"HELLO {here}\n".encode()
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    conn.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(64)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


@dataclass(frozen=True)
class Outside:
    public: str  # a public host outside (the control: an allowed command reaches it)
    lan: str  # another machine of the local network (private)
    metadata: str  # a cloud-metadata stand-in (link-local)
    host_public: str  # a second address of the host itself, public
    host_private: str  # a private address of the host itself (docker0's, a VPN's)


def reason() -> str | None:
    """None where the test network can be made here, else why not."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "making network namespaces and veth pairs needs root on Linux"
    for tool in ("ip", "pasta", "nft", "bwrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/install-system-deps.sh)"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def outside_network() -> Iterator[Outside]:
    tag = f"{random.randrange(16**6):06x}"
    a, b = random.randrange(1, 250), random.randrange(1, 250)
    place = Outside(
        public=f"6.{a}.{b}.10",
        lan=f"10.{a}.{b}.2",
        metadata="169.254.169.254",
        host_public=f"6.{a}.{b}.11",
        host_private=f"10.{a}.{b}.1",
    )
    ns, host_end, far_end = f"agl-out-{tag}", f"aglh{tag}", f"aglo{tag}"
    server = None
    _ip("netns", "add", ns)
    try:
        _ip("link", "add", host_end, "type", "veth", "peer", "name", far_end)
        _ip("link", "set", far_end, "netns", ns)
        _ip("addr", "add", f"{place.host_private}/24", "dev", host_end)
        _ip("addr", "add", f"{place.host_public}/32", "dev", host_end)
        _ip("link", "set", host_end, "up")
        for address in (f"{place.lan}/24", f"{place.public}/32", f"{place.metadata}/32"):
            _ip("-n", ns, "addr", "add", address, "dev", far_end)
        _ip("-n", ns, "link", "set", far_end, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", place.host_private)
        _ip("route", "add", f"{place.public}/32", "via", place.lan, "dev", host_end)
        _ip("route", "replace", f"{place.metadata}/32", "via", place.lan, "dev", host_end)
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-I", "-c", SERVER, str(PORT)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None and server.stdout.readline().strip() == "listening"
        yield place
    finally:
        if server is not None:
            server.kill()
            server.wait()
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("route", "del", f"{place.metadata}/32", "dev", host_end)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", host_end)
        for _ in range(50):  # the namespace's end of the pair goes with it once nothing holds it
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", ns)
                break
            time.sleep(0.01)
