"""What an allowed network may reach, as the settings, a workspace's `.agentlab.toml` and the proxy read it (no root
needed: tests/test_network_egress.py plays the commands against a real neighbourhood)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from agents.core.settings import Settings, SettingsError, load_settings
from agents.sandbox import egress_proxy, egress_rules
from agents.sandbox.egress_proxy import EgressProxy
from agents.sandbox.egress_rules import Egress, egress_for, parse_domains, parse_networks


def test_the_packages_preset_and_domains_are_read_and_a_bad_name_is_refused() -> None:
    found = parse_domains(["packages", "Example.COM.", "*.corp.example"])
    assert {"pypi.org", "files.pythonhosted.org", "registry.npmjs.org", "crates.io", "proxy.golang.org"} <= set(found)
    assert {"deb.debian.org", "github.com", "objects.githubusercontent.com"} <= set(found)
    assert found[-2:] == ("example.com", "corp.example")
    with pytest.raises(ValueError, match="not a domain name"):
        parse_domains(["pypi.org/simple"])
    assert egress_rules.domain_allowed("files.pythonhosted.org", ["pythonhosted.org"])
    assert not egress_rules.domain_allowed("evilpythonhosted.org", ["pythonhosted.org"])


def test_settings_refuse_a_bad_domain_or_range_naming_the_key(tmp_path: Path) -> None:
    base = {"telegram_bot_token": "1:x", "anthropic_api_key": "k", "allowed_user_ids": "1", "workspace_path": tmp_path}
    good = Settings(_env_file=None, **base, sandbox_network_domains="packages, a.example", sandbox_network_private="")
    assert (
        good.network.sandbox_network_domains == ("packages", "a.example") and good.network.sandbox_network_private == ()
    )
    for key, value in (("sandbox_network_domains", "a b"), ("sandbox_network_private", "10.0.0.300")):
        with pytest.raises(ValueError, match=key):
            Settings(_env_file=None, **base, **{key: value})


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("0.0.0.0/0", "takes in loopback"),
        ("::/0", "takes in loopback"),
        ("127.0.0.0/8", "takes in loopback"),
        ("127.0.0.2", "takes in loopback"),
        ("::1", "takes in loopback"),
        ("169.254.169.254", "takes in link-local"),
        ("169.254.0.0/16", "takes in link-local"),
        ("fe80::/10", "takes in link-local"),
        ("224.0.0.0/4", "takes in multicast"),
        ("ff02::1", "takes in multicast"),
        ("0.0.0.0", "takes in the unspecified address"),
        ("::", "takes in the unspecified address"),
        ("8.8.8.0/24", "is not wholly inside a private block"),
        ("10.0.0.0/7", "is not wholly inside a private block"),  # 10/8 and 11/8: half of it is public
        ("::ffff:127.0.0.2", "is not wholly inside a private block"),
        ("2001:db8::/32", "is not wholly inside a private block"),
    ],
)
def test_settings_refuse_a_private_range_that_is_not_a_lans(tmp_path: Path, value: str, reason: str) -> None:
    """SANDBOX_NETWORK_PRIVATE is for a LAN's machines (a package mirror). A range that takes in loopback (127.0.0.2
    reaches every service of the bot's machine bound to 0.0.0.0), link-local (cloud metadata), multicast or the
    unspecified address, or reaches outside the private blocks (0.0.0.0/0, ::/0), stops the bot at start with one
    sentence naming the key and the value."""
    required = {"telegram_bot_token": "1:x", "anthropic_api_key": "k", "allowed_user_ids": "1"}
    with pytest.raises(SettingsError) as refused:
        load_settings(
            _env_file=None, **required, workspace_path=tmp_path, sandbox_network_private=f"10.8.0.0/16,{value}"
        )
    message = str(refused.value)
    assert f"SANDBOX_NETWORK_PRIVATE: {value!r} {reason}" in message, message
    assert "a range must lie inside one of 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10" in message


def test_settings_take_a_range_inside_a_private_block(tmp_path: Path) -> None:
    required = {"telegram_bot_token": "1:x", "anthropic_api_key": "k", "allowed_user_ids": "1"}
    value = "192.168.1.20, 10.8.0.0/16, 172.16.5.0/24, 100.64.1.0/24, fd12::/64, 10.0.0.0/8"
    settings = load_settings(_env_file=None, **required, workspace_path=tmp_path, sandbox_network_private=value)
    assert settings.network.sandbox_network_private == (
        "192.168.1.20/32",
        "10.8.0.0/16",
        "172.16.5.0/24",
        "100.64.1.0/24",
        "fd12::/64",
        "10.0.0.0/8",
    )


NEVER_REACHED = ("127.0.0.2", "::ffff:127.0.0.2", "169.254.169.254", "fe80::1", "::1", "224.0.0.251", "0.0.0.0")


@pytest.mark.parametrize(
    "opened",
    [
        "10.0.0.0/8, fd00::/8",  # what the settings take (the control: these never held the addresses below)
        "0.0.0.0/0, ::/0",  # what they refuse, were it to reach the proxy some other way
        "127.0.0.0/8, 169.254.0.0/16, fe80::/10, ::ffff:0:0/96, 224.0.0.0/4, 0.0.0.0/8",
    ],
)
def test_no_opened_range_lets_the_proxy_reach_loopback_link_local_or_metadata(tmp_path: Path, opened: str) -> None:
    """Whatever range is opened, the proxy never connects to loopback beyond the machine's own listed addresses
    (127.0.0.2 reaches the bot's machine as 127.0.0.1 does; ::ffff:127.0.0.2 is 127.0.0.2 on a dual-stack socket),
    link-local (cloud metadata at 169.254.169.254, fe80::1), multicast or the unspecified address. An opened private
    range and the public Internet still are reached."""
    proxy = EgressProxy(tmp_path, ("example.com",), parse_networks(opened.split(",")))
    reached = [address for address in NEVER_REACHED if proxy.reachable(address)]
    assert not reached, f"{opened} lets the proxy reach {reached}"
    assert proxy.reachable("93.184.215.14")  # public
    if opened.startswith("10."):
        assert proxy.reachable("10.1.2.3") and proxy.reachable("fd00::5")


def test_the_rules_refuse_loopback_and_link_local_before_any_opened_range() -> None:
    """The namespace's nftables rules, with the widest ranges opened: loopback (all of 127.0.0.0/8, ::1 and the
    IPv4-mapped forms), link-local (169.254.0.0/16, fe80::/10), multicast and unspecified addresses are refused before
    the rule that accepts the opened ranges, so never let through by it."""
    text = egress_rules.rules(Egress(private=parse_networks(["0.0.0.0/0", "::/0"])), [])
    never4 = next((line for line in text.splitlines() if line.strip().startswith("set never4")), "")
    never6 = next((line for line in text.splitlines() if line.strip().startswith("set never6")), "")
    for network in ("127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "0.0.0.0/8"):
        assert f" {network}," in never4 or f" {network} " in never4, never4
    for network in ("::1/128", "fe80::/10", "ff00::/8", "::/128", "::ffff:127.0.0.0/104", "::ffff:169.254.0.0/112"):
        assert f" {network}," in never6 or f" {network} " in never6, never6
    assert text.index("ip daddr @never4 ") < text.index("ip daddr { 0.0.0.0/0 } accept"), text
    assert text.index("ip6 daddr @never6 ") < text.index("ip6 daddr { ::/0 } accept"), text
    if shutil.which("nft") is not None:
        checked = subprocess.run(["nft", "-c", "-f", "-"], input=text, capture_output=True, text=True)
        assert checked.returncode == 0 or "Operation not permitted" in checked.stderr, checked.stderr


def test_a_workspace_may_narrow_the_owners_domains_but_never_widen_them(tmp_path: Path) -> None:
    (tmp_path / ".agentlab.toml").write_text('[network]\ndomains = ["pypi.org", "evil.example"]\n')
    assert egress_for(["packages"], [], tmp_path).domains == ("pypi.org",)
    assert egress_for([], ["10.1.0.0/16"], tmp_path) == Egress(
        ("pypi.org", "evil.example"), parse_networks(["10.1.0.0/16"])
    )
    (tmp_path / ".agentlab.toml").write_text('[network]\ndomains = ["evil.example"]\n')
    assert egress_for(["pypi.org"], [], tmp_path).domains == ("pypi.org",)  # nothing left: the owner's list
    (tmp_path / ".agentlab.toml").write_text("[network\n")
    assert egress_for(["pypi.org"], [], tmp_path).domains == ("pypi.org",)  # unreadable: the owner's list


def test_the_question_names_the_reach() -> None:
    assert Egress().describe().startswith("any public address")
    narrowed = Egress(("pypi.org",), parse_networks(["192.168.1.20"]))
    assert narrowed.describe() == (
        "only these domains and their sub-domains: pypi.org; and the private networks 192.168.1.20/32"
    )


@pytest.mark.skipif(shutil.which("nft") is None, reason="nftables is not installed (scripts/install-system-deps.sh)")
def test_the_rules_are_valid_nftables_and_refuse_the_hosts_addresses_before_the_opened_ranges() -> None:
    text = egress_rules.rules(Egress(private=parse_networks(["10.7.0.0/16", "fd12::/64"])), ["10.7.0.1", "fd12::1"])
    checked = subprocess.run(["nft", "-c", "-f", "-"], input=text, capture_output=True, text=True)
    if checked.returncode != 0 and "Operation not permitted" in checked.stderr:
        pytest.skip("nft -c needs CAP_NET_ADMIN here")
    assert checked.returncode == 0, checked.stderr
    assert text.index("@host4") < text.index("10.7.0.0/16 }") < text.index("@blocked4")


async def _ask(proxy: EgressProxy, request: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(proxy.socket_path))
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def test_the_proxy_serves_only_the_domains_and_never_the_machines_own_addresses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name outside the domains is refused with the reason in the status line (what pip and curl print), before
    any look-up; the machine's own address is refused even inside an opened private range."""
    monkeypatch.setattr(egress_proxy, "host_addresses", lambda: {"10.7.0.1", "127.0.0.1", "::1"})
    proxy = EgressProxy(tmp_path, domains=("pypi.org",), private=parse_networks(["10.7.0.0/16"]))
    proxy.allow_all()
    await proxy.start()
    try:
        answer = await _ask(proxy, b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n")
        status = answer.split(b"\r\n", 1)[0]
        assert status == b"HTTP/1.1 403 Forbidden (agentlab: evil.example is not in the allowed domains " + (
            b"(SANDBOX_NETWORK_DOMAINS))"
        ), answer
        assert proxy.allowed("files.pypi.org", 443) and not proxy.allowed("pypi.org.evil.example", 443)
        assert proxy.refused == ["evil.example"] and "refused evil.example" in proxy.refused_note()
        assert not proxy.reachable("10.7.0.1") and proxy.reachable("10.7.0.2")  # opened, but not the machine's
    finally:
        await proxy.close()


async def test_what_the_proxy_keeps_and_says_of_refused_names_is_bounded(tmp_path: Path) -> None:
    """A command asked for 400 different long names outside the domains: the proxy kept each (64 KB each at most) for
    the command's whole run, and its note after the command's output, past the output's bound, listed every one."""
    proxy = EgressProxy(tmp_path, domains=("example.com",))
    proxy.allow_all()
    await proxy.start()
    try:
        for i in range(400):
            host = f"h{i}-" + ".".join(["a" * 60] * 3) + ".invalid"
            await _ask(proxy, f"CONNECT {host}:443 HTTP/1.1\r\n\r\n".encode())
        kept = len(proxy.refused) + proxy.refused_more
        note = proxy.refused_note()
    finally:
        await proxy.close()
    assert kept == 400 and len(proxy.refused) == 0 and len(note) < 2_000, (kept, len(note))
    assert note.count(".invalid") == 0 and "h0-" in note and "and 390 more" in note, note


@pytest.mark.parametrize("target", ["fifo", "elsewhere.toml"])
def test_an_agentlab_toml_link_is_not_followed_for_network_domains(tmp_path: Path, target: str) -> None:
    """A stranger's repository commits `.agentlab.toml` as a link: to a FIFO the bot's read (on its event loop, for
    every sandbox it builds) waited for ever, to /dev/zero it read until memory ran out, to a file of the host it read
    that file. A link is not followed; the same table as a plain file is read."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    table = '[network]\ndomains = ["example.org"]\n'
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
        (checkout / ".agentlab.toml").symlink_to(tmp_path / "fifo")
    elif target == "elsewhere.toml":
        (tmp_path / "elsewhere.toml").write_text(table)
        (checkout / ".agentlab.toml").symlink_to(tmp_path / "elsewhere.toml")
    found: list[object] = []
    # in a thread with a deadline: the old code never returned from the FIFO (released below if it still waits)
    reading = threading.Thread(target=lambda: found.append(egress_rules.workspace_domains(checkout)), daemon=True)
    reading.start()
    reading.join(10)
    if reading.is_alive():
        os.close(os.open(tmp_path / "fifo", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the bot waited on the FIFO a committed .agentlab.toml links to")
    assert found == [None]
    (checkout / ".agentlab.toml").unlink()
    (checkout / ".agentlab.toml").write_text(table)
    assert egress_rules.workspace_domains(checkout) == ("example.org",)
    (checkout / ".agentlab.toml").write_text(table + "#" * egress_rules.CONFIG_MAX_BYTES)
    assert egress_rules.workspace_domains(checkout) is None, "a file over the limit is not read"
