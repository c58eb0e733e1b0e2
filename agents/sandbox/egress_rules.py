"""What an allowed network reaches: the public Internet only, optionally only some domains; the nftables rules that
say so inside a command's own network namespace.

An allowed command's namespace is wired out by pasta (agents/sandbox/user_net.py), which carries whatever it is sent.
So before the command runs, the bot installs `rules(...)` in that namespace (agents/sandbox/netns_helper.py): every
connection to the host's own addresses (any interface: read when the namespace is made), loopback, private and shared
ranges, link-local (cloud metadata at 169.254.169.254), documentation, multicast and broadcast ranges is rejected at
once (a TCP reset, or an ICMP "administratively prohibited"), and its address is noted so the command's output says
why. DNS goes only to DNS_ADDRESS, which pasta forwards to the host's resolver; `SANDBOX_NETWORK_PRIVATE` ranges are
the only private addresses let through, and never loopback, link-local, multicast or unspecified addresses
(NEVER_OPENED: the host itself, cloud metadata), whatever range is opened (the settings refuse such a range, and one
that is not wholly private, at start). The command has no capability in its namespace, so it cannot change them.

With `SANDBOX_NETWORK_DOMAINS` (or a workspace's `[network] domains`) the namespace has no route out at all: its
only way out is the bot's HTTP proxy (agents/sandbox/egress_proxy.py), reached on loopback, which resolves each name
itself, refuses names outside the list and names that resolve to no public address.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agents.core.setting_groups import NEVER_OPENED, IPNetwork, never_opened
from agents.core.text import some_of
from agents.sandbox.safe_paths import NotRegularFile, UnsafePath, open_regular

log = logging.getLogger(__name__)

# the domains of the `packages` preset: package registries and the source hosts installs download from
CONFIG_MAX_BYTES = 64_000  # a repository's .agentlab.toml read for its [network] table: a few lines in practice
PACKAGES_PRESET = (
    "pypi.org",
    "files.pythonhosted.org",
    "pythonhosted.org",
    "registry.npmjs.org",
    "npmjs.org",
    "registry.yarnpkg.com",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "deb.debian.org",
    "security.debian.org",
    "github.com",
    "api.github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com",
    "release-assets.githubusercontent.com",
)
PRESETS = {"packages": PACKAGES_PRESET}

# where an allowed command sends DNS: pasta answers it from the host's resolver (`--dns-forward`); a link-local
# address, so it is never a real host's
DNS_ADDRESS = "169.254.53.53"
PROXY_PORT = 39124  # where the bot's proxy is reached on the namespace's loopback in domains mode

# never reached, whatever resolves to them (the IANA special-purpose registries' non-global entries)
BLOCKED_V4 = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, and 255.255.255.255 broadcast
)
BLOCKED_V6 = (
    "::/127",  # unspecified, loopback
    "::ffff:0:0/96",  # IPv4-mapped: judged as IPv4 would be, so never sent as IPv6
    "64:ff9b::/96",  # NAT64's well-known prefix: the gateway translates it to the IPv4 it carries, private too
    "64:ff9b:1::/48",
    "100::/64",
    "2001::/23",  # Teredo and other special-purpose assignments
    "2001:db8::/32",
    "2002::/16",  # 6to4 carries an IPv4 address, possibly a private one
    "fc00::/7",  # unique local
    "fe80::/10",  # link-local
    "fec0::/10",  # site-local (deprecated, still routed in some networks)
    "ff00::/8",  # multicast
)


@dataclass(frozen=True)
class Egress:
    """What an allowed network may reach: `domains` (empty: any public address), `private` networks let through."""

    domains: tuple[str, ...] = ()
    private: tuple[IPNetwork, ...] = ()

    @property
    def through_proxy(self) -> bool:
        return bool(self.domains)

    def describe(self) -> str:
        """The question's words for what an allowed command will reach."""
        if self.domains:
            reach = ", ".join(self.domains)
            where = f"only these domains and their sub-domains: {reach}"
        else:
            where = "any public address (not this machine, nor its private or link-local networks)"
        if self.private:
            where += "; and the private networks " + ", ".join(str(n) for n in self.private)
        return where


def parse_domains(items: Iterable[str]) -> tuple[str, ...]:
    """Domain names, lower-cased, with a preset's name (`packages`) replaced by its domains; a bad name is an error."""
    found: list[str] = []
    for item in items:
        name = item.strip().lower().rstrip(".").removeprefix("*.")
        if not name:
            continue
        if name in PRESETS:
            found += PRESETS[name]
            continue
        labels = name.split(".")
        if not all(label and len(label) <= 63 and label.replace("-", "").isalnum() for label in labels):
            raise ValueError(f"{item!r} is not a domain name (nor a preset: {', '.join(PRESETS)})")
        found.append(name)
    return tuple(dict.fromkeys(found))


def parse_networks(items: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Addresses or ranges (`192.168.1.20`, `10.8.0.0/16`, `fd12::/64`); a bad one is an error."""
    found: list[IPNetwork] = []
    for item in items:
        if item.strip():
            try:
                found.append(ipaddress.ip_network(item.strip(), strict=False))
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or range") from None
    return tuple(found)


def workspace_domains(checkout: Path) -> tuple[str, ...] | None:
    """The `[network] domains` of the owner's checkout's `.agentlab.toml` (a list, or one comma-separated string),
    None where it names none; a malformed file or name is ignored (logged) rather than opening anything.

    The file comes from a repository written by anyone and is read on the event loop: only a regular file, never
    through a link (one to a FIFO would stop the bot, one to /dev/zero fill its memory), and at most
    CONFIG_MAX_BYTES of it (a longer one is not read)."""
    try:
        fd = open_regular(checkout, ".agentlab.toml")
    except FileNotFoundError:
        return None
    except (OSError, UnsafePath, NotRegularFile) as err:
        log.warning("%s/.agentlab.toml: not read for [network]: %s", checkout, err)
        return None
    with os.fdopen(fd, "rb") as file:
        data = file.read(CONFIG_MAX_BYTES + 1)
    if len(data) > CONFIG_MAX_BYTES:
        log.warning("%s/.agentlab.toml: not read for [network]: over %d bytes", checkout, CONFIG_MAX_BYTES)
        return None
    try:
        table = tomllib.loads(data.decode("utf-8")).get("network")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        log.warning("%s/.agentlab.toml: not read for [network]: %s", checkout, err)
        return None
    listed = table.get("domains") if isinstance(table, dict) else None
    if isinstance(listed, str):
        listed = listed.split(",")
    if not isinstance(listed, list) or not all(isinstance(d, str) for d in listed):
        return None
    try:
        return parse_domains(listed)
    except ValueError as err:
        log.warning("%s/.agentlab.toml [network] domains: %s", checkout, err)
        return None


def egress_for(domains: Iterable[str], private: Iterable[str], checkout: Path | None = None) -> Egress:
    """The egress of a task's sandbox: SANDBOX_NETWORK_DOMAINS narrowed by the workspace's `[network] domains` (a
    repository may only narrow what the owner allowed), SANDBOX_NETWORK_PRIVATE."""
    allowed = parse_domains(domains)
    listed = workspace_domains(checkout) if checkout is not None else None
    if listed is not None:
        narrowed = tuple(d for d in listed if not allowed or domain_allowed(d, allowed))
        allowed = narrowed or allowed
    return Egress(allowed, parse_networks(private))


_PLAIN_HOST = re.compile(r"[A-Za-z0-9.:_-]+")


def plain_host(host: str) -> bool:
    """Whether `host` is made only of what a domain name or an IP address is written with: a NUL, a space or any
    other byte would let a name pass the domain check (`127.0.0.1\0.allowed.example` ends with the allowed name)
    while the name lookup reads only what comes before it."""
    return bool(_PLAIN_HOST.fullmatch(host))


def domain_allowed(host: str, domains: Iterable[str]) -> bool:
    """Whether `host` is one of `domains` or a sub-domain of one (never a host written with other characters)."""
    if not plain_host(host):
        return False
    host = host.lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in domains)


def host_addresses() -> set[str]:
    """Every address of this machine's interfaces (IPv4 from /proc/net/fib_trie's local entries, IPv6 from
    /proc/net/if_inet6): a connection to any of them reaches the host itself, whatever interface it is on."""
    found: set[str] = set()
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for previous, line in zip(lines, lines[1:], strict=False):
            if line.strip() == "/32 host LOCAL":
                found.add(previous.split()[-1])
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            raw = line.split()[0]
            found.add(str(ipaddress.IPv6Address(int(raw, 16))))
    return found


def never_reached(address: str) -> bool:
    """Whether `address` is one no private range opens (NEVER_OPENED: loopback, link-local, multicast, unspecified),
    an IPv4-mapped one (`::ffff:127.0.0.2`, which a dual-stack socket sends to 127.0.0.2) judged by what it carries."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return never_opened(ipaddress.ip_network(ip)) is not None


def never_sets() -> dict[int, list[str]]:
    """NEVER_OPENED by IP version for the rules, the IPv4 ranges also in their IPv4-mapped IPv6 form."""
    found: dict[int, list[str]] = {4: [], 6: []}
    for network, _ in NEVER_OPENED:
        found[network.version].append(str(network))
        if network.version == 4:
            found[6].append(f"::ffff:{network.network_address}/{96 + network.prefixlen}")
    return found


def rules(egress: Egress, hosts: Iterable[str]) -> str:
    """The nftables ruleset of an allowed command's namespace (see the module's docstring): the host's own addresses
    and NEVER_OPENED are refused even inside an opened private range."""
    own: dict[int, set[str]] = {4: set(), 6: set()}
    for address in hosts:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        own[ip.version].add(f"{ip}/{ip.max_prefixlen}")
    opened = {v: [str(n) for n in egress.private if n.version == v] for v in (4, 6)}
    blocked = {4: BLOCKED_V4, 6: BLOCKED_V6}
    never = never_sets()
    family = {4: "ip", 6: "ip6"}
    lines = ["table inet agentlab {"]
    for v in (4, 6):
        lines.append(f"  set refused{v} {{ type ipv{v}_addr; flags dynamic; size 256; }}")
        for name, members in ((f"host{v}", sorted(own[v])), (f"never{v}", never[v]), (f"blocked{v}", blocked[v])):
            elements = f" elements = {{ {', '.join(members)} }};" if members else ""
            lines.append(f"  set {name} {{ type ipv{v}_addr; flags interval; auto-merge;{elements} }}")
    lines += [
        "  chain out {",
        "    type filter hook output priority 0; policy accept;",
        '    oifname "lo" accept',
        f"    ip daddr {DNS_ADDRESS} meta l4proto {{ tcp, udp }} th dport 53 accept",
        # the link's own housekeeping, answered by pasta and never carried out: IPv6 neighbour and router discovery
        # (to link-local and solicited-node addresses) passes; the kernel's multicast listener reports and IGMP are
        # dropped quietly (they are not the command's connections)
        "    icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } accept",
        "    ip6 daddr ff02::/16 meta l4proto ipv6-icmp drop",
        "    meta l4proto igmp drop",
    ]

    def refuse(v: int, match: str) -> list[str]:
        noted = f"{match} add @refused{v} {{ {family[v]} daddr }}"
        return [
            f"    {noted} meta l4proto tcp reject with tcp reset",
            f"    {noted} reject with icmpx admin-prohibited",
        ]

    for v in (4, 6):
        lines += refuse(v, f"{family[v]} daddr @host{v}")
        lines += refuse(v, f"{family[v]} daddr @never{v}")
    for v in (4, 6):
        if opened[v]:
            lines.append(f"    {family[v]} daddr {{ {', '.join(opened[v])} }} accept")
    for v in (4, 6):
        lines += refuse(v, f"{family[v]} daddr @blocked{v}")
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def refused_note(addresses: Iterable[str]) -> str:
    """What the command's output gets when the sandbox refused some of its connections."""
    listed = sorted(set(addresses))
    if not listed:
        return ""
    shown = some_of(listed, 10)
    return (
        f"\n[the sandbox refused connections to {shown}: an allowed network reaches the public Internet only, never "
        "this machine, loopback, private, shared or link-local networks (SANDBOX_NETWORK_PRIVATE opens a private "
        "address)]"
    )
