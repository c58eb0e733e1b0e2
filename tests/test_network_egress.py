"""What a command allowed the network reaches, played by a hostile command against a neighbourhood the test makes
(tests/support/outside_net.py): a public host (the control), a machine of the local network, a cloud-metadata
stand-in, and extra addresses of the host itself (a public and a private one), plus the host's loopback.

The public Internet only: everything else is refused at once (a refused connection, never a timeout) and the output
says why; the command cannot lift the rules; SANDBOX_NETWORK_PRIVATE opens one private range and nothing else; with
SANDBOX_NETWORK_DOMAINS only those names get out, through the bot's proxy.
"""

from __future__ import annotations

import _socket
import asyncio
import dataclasses
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import SandboxSpec, spec_for
from agents.sandbox.egress_rules import Egress, parse_domains, parse_networks
from agents.sandbox.shell import CommandResult, run_command
from tests.support.outside_net import PORT, Outside, outside_network, reason
from tests.support.processes import Listener
from tests.support.sandbox import PROBE as SANDBOX_PROBE

pytestmark = pytest.mark.skipif(reason() is not None, reason=str(reason()))

PROBE = r"""
import json, socket, sys
out = {}
for host, port in json.loads(sys.argv[1]):
    try:
        with socket.create_connection((host, port), timeout=20) as s:
            s.settimeout(20)
            out[host] = "REACHED " + s.recv(200).decode(errors="replace").strip().splitlines()[-1]
    except OSError as err:
        out[host] = type(err).__name__ + ": " + str(err)
print("PROBES " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def outside() -> Iterator[Outside]:
    try:
        made = outside_network()
        place = made.__enter__()
    except subprocess.CalledProcessError as err:  # e.g. a container that may not make network namespaces
        pytest.skip(f"the test network cannot be made here: {err.stderr.strip()}")
    try:
        yield place
    finally:
        made.__exit__(None, None, None)


@pytest.fixture
def host_loopback() -> Iterator[Listener]:
    listener = Listener("127.0.0.1")
    yield listener
    listener.close()


def allowed(root: Path, egress: Egress | None = None) -> SandboxSpec:
    return dataclasses.replace(spec_for(SecretsFilter(), SANDBOX_PROBE, root, network=True), egress=egress or Egress())


async def probe(spec: SandboxSpec, targets: list[tuple[str, int]], before: str = "") -> tuple[dict[str, str], str]:
    script = spec.worktree / "probe.py"
    script.write_text(PROBE)
    command = f"{before}python3 probe.py '{json.dumps(targets)}'"
    result: CommandResult = await run_command(command, spec.worktree, 120, sandbox=spec)
    line = next(x for x in result.output.splitlines() if x.startswith("PROBES "))
    return json.loads(line.removeprefix("PROBES ")), result.output


async def test_an_allowed_command_reaches_the_public_internet_and_nothing_of_the_host_or_its_networks(
    tmp_path: Path, outside: Outside, host_loopback: Listener
) -> None:
    """Before, pasta carried everything: the host's second addresses, the local network and the metadata address
    were all reached. Now only the public host is; each other one is refused at once, and the output says why."""
    host_side = [Listener(outside.host_public), Listener(outside.host_private)]
    try:
        targets = [(outside.public, PORT), (outside.lan, PORT), (outside.metadata, PORT)]
        targets += [(x.host, x.port) for x in (*host_side, host_loopback)]
        found, output = await probe(allowed(tmp_path.resolve()), targets)
    finally:
        for listener in host_side:
            listener.close()
    assert found[outside.public] == f"REACHED HELLO {outside.public}", output
    for refused in (outside.lan, outside.metadata, outside.host_public, outside.host_private):
        assert found[refused].startswith("ConnectionRefusedError"), (refused, output)  # at once: no timeout
        assert refused in output.split("[the sandbox refused connections to ", 1)[1], output
    assert found["127.0.0.1"].startswith("ConnectionRefusedError"), output  # its own loopback: nobody listens
    assert all(x.connections == 0 for x in (*host_side, host_loopback))
    assert "reaches the public Internet only" in output


async def test_the_command_cannot_lift_the_rules(tmp_path: Path, outside: Outside) -> None:
    """A hostile command tries to flush the rules (as itself, and as root of a user namespace of its own) before
    calling the metadata address: both fail, and the address stays refused."""
    lift = "nft flush ruleset; unshare -Ur nft flush ruleset; "
    found, output = await probe(allowed(tmp_path.resolve()), [(outside.metadata, PORT), (outside.public, PORT)], lift)
    assert found[outside.metadata].startswith("ConnectionRefusedError"), output
    assert found[outside.public].startswith("REACHED"), output


async def test_a_private_range_opened_by_the_owner_is_the_only_one_reached(tmp_path: Path, outside: Outside) -> None:
    """SANDBOX_NETWORK_PRIVATE=<the LAN's /24> (a package mirror there): the LAN machine is reached; the host's own
    address in that very range, and the metadata address, still are not."""
    host_private = Listener(outside.host_private)
    try:
        egress = Egress(private=parse_networks([f"{outside.lan}/24"]))
        targets = [(outside.lan, PORT), (outside.metadata, PORT), (host_private.host, host_private.port)]
        found, output = await probe(allowed(tmp_path.resolve(), egress), targets)
    finally:
        host_private.close()
    assert found[outside.lan] == f"REACHED HELLO {outside.lan}", output
    assert found[outside.metadata].startswith("ConnectionRefusedError"), output
    assert found[outside.host_private].startswith("ConnectionRefusedError") and host_private.connections == 0, output


@pytest.fixture
def names(outside: Outside, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bot's resolver, as DNS would answer: pypi.org is the public host, files.pythonhosted.org a private one."""
    real = socket.getaddrinfo
    fake = {"pypi.org": outside.public, "files.pythonhosted.org": outside.lan, "evil.example": outside.public}

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        return real(fake.get(str(host), host), *args, **kwargs)  # type: ignore[arg-type]  # a stand-in takes getaddrinfo's arguments as they come

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    guarded = socket.socket.connect  # the suite's guard against the real network: the test's own one is let through
    ours = {outside.public, outside.lan}

    def connect(self: socket.socket, address: object) -> object:
        if isinstance(address, tuple) and address[0] in ours:
            return _socket.socket.connect(self, address)  # the unguarded connect socket.socket inherits
        return guarded(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.mark.usefixtures("names")
async def test_with_domains_only_those_names_get_out_through_the_proxy(tmp_path: Path, outside: Outside) -> None:
    """SANDBOX_NETWORK_DOMAINS=packages: pypi.org passes through the bot's proxy; a name outside the preset is refused
    with the reason in the status line curl shows; a name of the preset that resolves to a private address is
    refused too; and the public host's address, tried directly, has no route at all."""
    spec = allowed(tmp_path.resolve(), Egress(domains=parse_domains(["packages"])))
    curl = "curl -sS -m 30 "
    command = (
        f"{curl}http://pypi.org:{PORT}/simple/; echo; "
        f"{curl}-i http://evil.example:{PORT}/ | head -1; "
        f"{curl}-i http://files.pythonhosted.org:{PORT}/ | head -1; "
        f"python3 -c \"import socket; socket.create_connection(('{outside.public}', {PORT}), timeout=20)\" "
        "2>&1 | tail -1"
    )
    result = await run_command(command, spec.worktree, 120, sandbox=spec)
    lines = result.output.splitlines()
    assert f"HELLO {outside.public}" in lines, result.output
    assert any(x.startswith("HTTP/1.1 403") and "evil.example is not in the allowed domains" in x for x in lines)
    assert any(x.startswith("HTTP/1.1 403") and "files.pythonhosted.org resolves to no public" in x for x in lines)
    assert "Network is unreachable" in result.output, result.output
    assert "the sandbox's proxy refused evil.example" in result.output


async def test_a_service_with_the_network_gets_the_same_rules(tmp_path: Path, outside: Outside) -> None:
    """A background service (and so an MCP server with `network: true`, started the same way) allowed the network
    reaches the public host and is refused the metadata address."""
    from agents.sandbox.services import TaskServices
    from agents.sandbox.task_limits import TaskBounds

    root = tmp_path.resolve()
    (root / "probe.py").write_text(PROBE)
    bounds = TaskBounds("egress", 1 << 30, 512)
    spec = dataclasses.replace(allowed(root), task=bounds)
    targets = json.dumps([(outside.metadata, PORT), (outside.public, PORT)])
    try:
        said = await TaskServices.of(bounds).start(spec, f"python3 probe.py '{targets}'; sleep 30", {})
        service = TaskServices.of(bounds).services[0]
        for _ in range(600):  # the probe's line, then the service sleeps until the task ends
            if "PROBES" in service.log.read_text():
                break
            await asyncio.sleep(0.05)
        log = service.log.read_text()
    finally:
        await bounds.close()
    found = json.loads(log.split("PROBES ", 1)[1].splitlines()[0])
    assert found[outside.public] == f"REACHED HELLO {outside.public}", (said, log)
    assert found[outside.metadata].startswith("ConnectionRefusedError"), log


THROUGH_THE_FORWARDER = r"""
import socket, sys, time
target, port = sys.argv[1], int(sys.argv[2])
for _ in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        break
    except OSError:
        time.sleep(0.1)
else:
    print("GOT no forwarder"); sys.exit(0)
s.sendall(f"GET http://{target}/ HTTP/1.0\r\n\r\n".encode())
data = b""
s.settimeout(15)
try:
    while chunk := s.recv(4096):
        data += chunk
except OSError:
    pass
print("GOT " + data.decode(errors="replace").replace("\r\n", " | "))
"""

# The browser's MCP server, played by the bot's own Python: when the test writes `browser-go`, it asks the page's
# host through the forwarder, as Chromium's network process would, and writes what came back to `browser-got`.
STAND_IN_BROWSER = """
import pathlib, subprocess, sys, time
worktree = pathlib.Path(sys.argv[-1])  # it starts in a home of its own
go = worktree / "browser-go"
while not go.exists():
    time.sleep(0.05)
via = [sys.executable, str(worktree / "via.py"), *go.read_text().split()]
(worktree / "browser-got").write_text(subprocess.run(via, capture_output=True, text=True).stdout)
time.sleep(120)
"""


@pytest.mark.usefixtures("names")
async def test_the_browsers_way_out_is_the_browsers_alone(tmp_path: Path, outside: Outside) -> None:
    """The owner lets the browser open a page of one outside host ("Allow once"). The forwarder to the proxy listens
    on the loopback of the task's network namespace, which the task's commands share: a command never allowed the
    network sent the same request there and reached the host. Now only the browser's own processes are carried."""
    from agents.sandbox.egress_proxy import PROXY_PORT
    from agents.sandbox.network_gate import NetworkDecision
    from agents.sandbox.task_limits import TaskBounds
    from agents.tools import mcp_tasks
    from agents.tools.browser import ENTRY, BrowserInstall, BrowserRun

    root = (tmp_path / "wt").resolve()
    root.mkdir()
    (root / "via.py").write_text(THROUGH_THE_FORWARDER)
    entry = tmp_path / "tools" / ENTRY
    entry.parent.mkdir(parents=True)
    entry.write_text(STAND_IN_BROWSER)
    run = BrowserRun(BrowserInstall(sys.executable, entry, "/bin/true", "stand-in"), may_go_out=True)
    run.config = dataclasses.replace(run.config, args=(*run.config.args, str(root)))
    bounds = TaskBounds("browser-way-out", 1 << 30, 512)
    spec = dataclasses.replace(spec_for(SecretsFilter(), SANDBOX_PROBE, root), task=bounds)  # network not allowed
    asked: list[str] = []

    async def owner_allows_once(what: str, cautions: tuple[str, ...]) -> NetworkDecision:
        asked.append(what)
        return NetworkDecision(True, "allowed once by the owner")

    target = f"pypi.org:{PORT}"
    try:
        await run.connector(spec, bounds, mcp_tasks.connector)()
        await run.gate(owner_allows_once, lambda: False)("navigate_page", {"url": f"http://{target}/"}, False)
        command = await run_command(f"python3 via.py {target} {PROXY_PORT}", root, 90, sandbox=spec)
        (root / "browser-go").write_text(f"{target} {PROXY_PORT}")
        for _ in range(600):
            if (root / "browser-got").exists():
                break
            await asyncio.sleep(0.05)
        browser = (root / "browser-got").read_text()
    finally:
        await bounds.end_processes()
        await bounds.close()
    assert asked == [f"open http://{target}/ in the browser (navigate_page)"], asked
    assert f"HELLO {outside.public}" in browser, browser  # the control: the browser's own request is carried
    assert "GOT" in command.output and "HELLO" not in command.output, command.output


REACH = r"""
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        print("REACH " + s.recv(200).decode(errors="replace").strip().splitlines()[-1])
except OSError as err:
    print("REACH " + type(err).__name__)
"""


async def test_an_allowance_for_one_command_ends_with_it(tmp_path: Path, outside: Outside) -> None:
    """A command allowed the network once leaves a detached child behind, relaying to the outside host on a unix
    socket in the worktree; the task's next command (not allowed) reaches the host neither directly nor through it."""
    from agents.sandbox.task_limits import TaskBounds

    root = tmp_path.resolve()
    (root / "reach.py").write_text(REACH)
    (root / "relay.py").write_text(
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX); s.bind('relay.sock'); s.listen(4)\n"
        "while True:\n"
        "    c, _ = s.accept()\n"
        f"    u = socket.create_connection(('{outside.public}', {PORT}), timeout=10)\n"
        "    u.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); c.sendall(u.recv(200)); c.close()\n"
    )
    bounds = TaskBounds("allowed-once", 1 << 30, 512)
    spec = dataclasses.replace(spec_for(SecretsFilter(), SANDBOX_PROBE, root), task=bounds)
    try:
        first = await run_command(
            f"python3 reach.py {outside.public} {PORT}; (setsid nohup python3 relay.py >/dev/null 2>&1 &); sleep 1",
            root,
            60,
            sandbox=spec.with_network(True),
        )
        later = await run_command(
            f'python3 reach.py {outside.public} {PORT}; python3 -c "import socket; c = socket.socket(socket.AF_UNIX); '
            "c.settimeout(5); c.connect('relay.sock'); print('RELAY', c.recv(200))\" 2>&1 | tail -1",
            root,
            60,
            sandbox=spec,
        )
    finally:
        await bounds.close()
    assert f"REACH HELLO {outside.public}" in first.output, first.output  # allowed, it got out
    assert "REACH" in later.output and "HELLO" not in later.output, later.output
