"""The browser's only way out of its task, and a command's in domains mode: an HTTP proxy the bot runs, reached
through a unix socket.

The frontend worker's browser lives in the task's network namespace: loopback only, so it reaches the task's services
on `localhost` and nothing else. A page outside the task (a reference site) is reached only through this proxy, and
only for hosts the owner allowed (`allow(host, port)`: "Allow once" for that URL's host, on the web's ports and the
URL's own, not its other services; "Allow for this task" or SANDBOX_NETWORK=on: `allow_all()`). Everything else is
refused with a 403 before any connection is made.
Inside the sandbox `proxy_forward.py` (plain Python, no agentlab import) listens on loopback and carries each
connection to the socket: Chromium is started with `--proxy-server=http://127.0.0.1:PORT` and, as Chromium does
by default, sends loopback addresses directly, never to the proxy.

The proxy connects from the bot's network, so it never connects to an address of the bot's machine or its private
networks (loopback, private, link-local, reserved, multicast), nor to any of the machine's own addresses (a public one
included), whatever name resolved to it; `private` networks (SANDBOX_NETWORK_PRIVATE) are the only exception, and
never for loopback, link-local (cloud metadata), multicast or unspecified addresses, whatever range they open. With
`domains` (SANDBOX_NETWORK_DOMAINS) only those names and their sub-domains are served. A command allowed the network in
domains mode reaches the proxy the same way (agents/sandbox/user_net.py). A refusal says why in its status line, which
is what pip, npm, git and curl show. A plain-HTTP request is sent with `Connection: close`, its `Host` header set to
the host that was checked (a shared front, such as a CDN serving an allowed name, routes by that header: the
client's own would reach a site outside the list), and only its own body after it (a request pipelined behind it is
never read, so never sent unchecked). Inside a CONNECT tunnel the proxy sees nothing (TLS): a client may name another
site of the same front there (its SNI and Host), which only a proxy that breaks TLS open could stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from pathlib import Path
from urllib.parse import urlsplit

from agents.core.setting_groups import IPNetwork
from agents.core.text import some_of
from agents.sandbox.egress_rules import domain_allowed, host_addresses, never_reached, plain_host

log = logging.getLogger(__name__)

FORWARDER = Path(__file__).with_name("proxy_forward.py")
PROXY_PORT = 39123  # where the forwarder listens inside the task's network namespace
HEAD_LIMIT = 64 * 1024
HEAD_SECONDS = 30.0
CONNECT_SECONDS = 15.0
REFUSED_KEPT = 50  # distinct refused hosts remembered for the note (a command may ask for millions)
REFUSED_SHOWN = 10  # named in the note; the rest counted
HOST_SHOWN_CHARS = 100  # of each name in the note (a name may be 64 KB long)
_HOP_HEADERS = (b"proxy-connection", b"connection", b"keep-alive", b"proxy-authorization", b"host")
WEB_PORTS = frozenset({80, 443})  # what an allowed host is reached on besides its URL's own port


def public(address: str) -> bool:
    """Whether the proxy may connect to `address`: not the bot's machine, nor a private or special network, in any
    spelling: an IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`, 6to4 `2002:AABB:CCDD::`, Teredo
    `2001:0::/32`) is judged by what it carries, and site-local `fec0::/10` (deprecated, still routed inside some
    networks) is private."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:
            return False
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.sixtofour is not None:
            return public(str(ip.sixtofour))
        elif ip.teredo is not None:
            return False  # a tunnel through a relay to the client address it carries: never a plain public host
    return ip.is_global and not (ip.is_multicast or ip.is_reserved)


class EgressProxy:
    """One task's proxy: `start()` listens on `socket_path`, `allow`/`allow_all` open hosts, `close()` ends it."""

    def __init__(self, folder: Path, domains: tuple[str, ...] = (), private: tuple[IPNetwork, ...] = ()) -> None:
        self.folder = folder
        self.domains = domains
        self.private = private
        self.socket_path = folder / "proxy.sock"
        self.hosts: dict[str, set[int]] = {}  # allowed host → its ports
        self.everything = False
        self.refused: list[str] = []  # hosts asked for and refused (the browser's tools say so), REFUSED_KEPT at most
        self.refused_more = 0  # refused past REFUSED_KEPT: counted only
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.address_ok = self.reachable  # tests point a host at a local listener through this
        self._own = host_addresses()

    def reachable(self, address: str) -> bool:
        """Whether the proxy may connect to `address`: public and not the machine's own, or in `private` (never a
        loopback, link-local, multicast or unspecified address, in any spelling: no range opens those)."""
        bare = address.split("%", 1)[0]
        ip = ipaddress.ip_address(bare)
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        if bare in self._own or (mapped is not None and str(mapped) in self._own):  # ::ffff:<own> is the host too
            return False
        if never_reached(bare):
            return False
        return public(bare) or any(ip in network for network in self.private)

    @property
    def listening(self) -> bool:
        """Whether `start` made its socket (and `shut` has not closed it since)."""
        return self._server is not None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path), limit=HEAD_LIMIT)
        self.socket_path.chmod(0o666)  # the sandbox's user may differ from the bot's (a user namespace)

    def allow(self, host: str, port: int) -> None:
        """Open `host` on the web's ports and on `port` (that of the URL the owner allowed)."""
        self.hosts.setdefault(host.lower().strip("[]"), set(WEB_PORTS)).add(port)

    def allow_all(self) -> None:
        self.everything = True

    def allowed(self, host: str, port: int) -> bool:
        host = host.lower().strip("[]")
        if self.domains and not domain_allowed(host, self.domains):
            return False
        return self.everything or port in self.hosts.get(host, ())

    def refusal(self, host: str, port: int) -> str:
        """Why `host:port` is refused, for the client (the status line) and the command's output."""
        if self.domains and not domain_allowed(host, self.domains):
            return f"{host} is not in the allowed domains (SANDBOX_NETWORK_DOMAINS)"
        if host.lower().strip("[]") in self.hosts:
            return f"port {port} of {host} was not allowed by the owner (its web pages were)"
        return f"{host} was not allowed by the owner"

    def refuse(self, host: str) -> None:
        """Remember `host` as refused (its first HOST_SHOWN_CHARS), up to REFUSED_KEPT names, then only a count."""
        name = host[:HOST_SHOWN_CHARS] + ("…" if len(host) > HOST_SHOWN_CHARS else "")
        if name in self.refused:
            return
        if len(self.refused) < REFUSED_KEPT:
            self.refused.append(name)
        else:
            self.refused_more += 1

    def refused_names(self) -> str:
        """The refused names for a note, REFUSED_SHOWN of them and how many more; both lists start again."""
        hosts = some_of(self.refused, REFUSED_SHOWN, self.refused_more)
        self.refused.clear()
        self.refused_more = 0
        return hosts

    def refused_note(self) -> str:
        """After a command in domains mode: the names the proxy refused, once."""
        hosts = self.refused_names()
        return (
            f"\n[the sandbox's proxy refused {hosts}: an allowed command reaches only "
            f"{', '.join(self.domains) if self.domains else 'public addresses'}]"
            if hosts
            else ""
        )

    async def close(self) -> None:
        self.shut()

    def shut(self) -> None:
        """Stop serving: the server, every connection, the socket file."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError) as err:
            log.debug("egress proxy: %s", err)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HEAD_SECONDS):
            head = await reader.readuntil(b"\r\n\r\n")
        method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if method == "CONNECT":
            host, _, port_text = target.rpartition(":")
            port = int(port_text)
        else:
            parts = urlsplit(target)
            if parts.scheme != "http" or not parts.hostname:
                return await _refuse(writer, 400, "only http:// requests and CONNECT go through this proxy")
            host, port = parts.hostname, parts.port or 80
        host = host.strip("[]")
        if not plain_host(host):  # a NUL or any other byte a name lookup would read differently than the check did
            self.refuse(repr(host))
            return await _refuse(writer, 400, "a host is a domain name or an IP address, nothing else")
        if not self.allowed(host, port):
            self.refuse(host)
            return await _refuse(writer, 403, self.refusal(host, port))
        body = 0
        if method != "CONNECT":
            fields = _header_fields(head)
            if b"transfer-encoding" in fields:  # its end is found only by parsing it: pipelining would hide there
                return await _refuse(writer, 400, "a chunked request body goes over https only through this proxy")
            try:
                body = int(fields.get(b"content-length", b"0"))
            except ValueError:
                return await _refuse(writer, 400, "the Content-Length is not a number")
        upstream = await self._connect(host, port)
        if upstream is None:
            return await _refuse(writer, 403, f"{host} resolves to no public address")
        up_reader, up_writer = upstream
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            return
        up_writer.write(_origin_form(head, method, target, version))
        await asyncio.gather(_send_body(reader, up_writer, body), _pipe(up_reader, writer))

    async def _connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(CONNECT_SECONDS):
            found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            for _family, _type, _proto, _name, address in found:
                if self.address_ok(str(address[0])):
                    return await asyncio.open_connection(str(address[0]), port)
        return None


def _header_fields(head: bytes) -> dict[bytes, bytes]:
    """The request's header fields, names lower-cased (the last of a repeated one)."""
    fields = {}
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon:
            fields[name.strip().lower()] = value.strip()
    return fields


def _origin_form(head: bytes, method: str, target: str, version: str) -> bytes:
    """The request as the origin server expects it: its path, no proxy headers, the checked host as `Host`,
    `Connection: close`."""
    parts = urlsplit(target)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = head.split(b"\r\n")[1:]
    kept = [line for line in lines if line and line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]
    host = f"Host: {parts.netloc.rpartition('@')[2]}".encode("latin-1")  # never the URL's user:password@
    return b"\r\n".join([f"{method} {path} {version}".encode("latin-1"), host, *kept, b"Connection: close", b"", b""])


async def _send_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, length: int) -> None:
    """Send the request's `length` bytes of body, and nothing the client sends after them."""
    try:
        while length > 0 and (data := await reader.read(min(length, 65536))):
            writer.write(data)
            length -= len(data)
            await writer.drain()
    except OSError:
        pass


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()


async def _refuse(writer: asyncio.StreamWriter, status: int, why: str) -> None:
    body = f"agentlab: {why}\n".encode()
    reason = {400: "Bad Request", 403: "Forbidden"}[status] + f" (agentlab: {why})"  # clients show the status line
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()
