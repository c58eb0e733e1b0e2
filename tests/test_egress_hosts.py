"""A hostile worker allowed the network (or one domain) trying to reach more, against the egress proxy and rules
themselves (offline, loopback only): a host written with a NUL (or any byte names are not written with) is refused
before the domain check a name lookup would read differently; the machine's own address in its IPv4-mapped
spelling is the machine; the rules refuse NAT64's well-known prefix as the proxy does."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import pytest

from agents.sandbox import egress_proxy, egress_rules
from agents.sandbox.egress_proxy import EgressProxy
from agents.sandbox.egress_rules import Egress


async def _ask(proxy: EgressProxy, request: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(proxy.socket_path))
    writer.write(request)
    await writer.drain()
    try:
        async with asyncio.timeout(5):
            answer = await reader.read(4096)
    finally:
        writer.close()
    return answer


@pytest.mark.parametrize("form", ["connect", "absolute"])
async def test_a_nul_byte_in_the_host_does_not_escape_the_domain_list(tmp_path: Path, form: str) -> None:
    """Domains mode (allowed.example only). `127.0.0.1\\0.allowed.example` ends with `.allowed.example`, so a domain
    check alone passes it, and Python's getaddrinfo hands the C library the name cut at the NUL: `127.0.0.1`. Here
    127.0.0.1 stands in for any public host outside the list (the `address_ok` hook); refused with a 400."""
    reached: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.append(b"connected")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nOUTSIDE")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = EgressProxy(tmp_path, domains=("allowed.example",))
    proxy.allow_all()
    proxy.address_ok = lambda address: address == "127.0.0.1"  # "a public address" for this test
    await proxy.start()
    try:
        host = b"127.0.0.1\x00.allowed.example"
        if form == "connect":
            request = b"CONNECT " + host + b":%d HTTP/1.1\r\nHost: x\r\n\r\n" % port
        else:
            request = b"GET http://" + host + b":%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % port
        answer = await _ask(proxy, request)
        await asyncio.sleep(0.1)
        assert not reached and b"OUTSIDE" not in answer and answer.startswith(b"HTTP/1.1 4"), answer
    finally:
        await proxy.close()
        server.close()


def test_the_machines_own_address_in_ipv4_mapped_spelling_is_not_reachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine with a public address on an interface (a VPS): `::ffff:<own>` on a dual-stack socket reaches the
    machine itself (its sshd, the bot's own services), as `<own>` does: both refused."""
    own = "1.1.1.1"  # stand-in for the machine's own public address
    monkeypatch.setattr(egress_proxy, "host_addresses", lambda: {own, "127.0.0.1", "::1"})
    proxy = EgressProxy(tmp_path)
    assert not proxy.reachable(own)  # the plain spelling is refused (control)
    assert not proxy.reachable(f"::ffff:{own}")


def test_the_rules_refuse_the_nat64_prefix_the_proxy_refuses() -> None:
    """Direct mode (pasta under nftables). `64:ff9b::/96` (RFC 6052 NAT64) carries an IPv4 address: on a host behind
    NAT64 (IPv6-only cloud networks), `64:ff9b::a00:1` is 10.0.0.1 and `64:ff9b::a9fe:a9fe` the metadata address.
    The proxy's `public()` refuses it, and so do the rules."""
    target = ipaddress.ip_address("64:ff9b::a9fe:a9fe")
    assert not egress_proxy.public(str(target))  # the proxy refuses it (control)
    blocked = [ipaddress.ip_network(n) for n in egress_rules.BLOCKED_V6]
    assert any(target in n for n in blocked), egress_rules.BLOCKED_V6
    assert "64:ff9b::/96" in egress_rules.rules(Egress(), [])
