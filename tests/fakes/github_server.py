"""A fake GitHub REST API on loopback, for the bot's real gidgethub client: repositories, pull requests, comments and
check runs, kept as state the tests read back. Strict: every request must carry the expected token (401 otherwise);
a pull request's head must be a branch that was really pushed to the repository's `origin` (a local bare repository);
a call to anything not modelled here is recorded in `unexpected` and answered 404, and the fixture fails the test
for it. GraphQL (`POST /graphql`) serves one operation, the mutation `markPullRequestReadyForReview` on a known pull
request's node id; any other query is unexpected too (answered with GraphQL's `errors`). `fail_next` scripts errors (a 5xx, a rate limit with its headers). `send_webhook_event` plays GitHub's side of a
webhook event: a signed POST to the bot's /github.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import re
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from agents.core.tls import client_tls

from .serve_loop import serve_in_thread, stop_serving

T = TypeVar("T")


@dataclass
class FakePull:
    number: int
    title: str
    body: str
    head: str
    base: str
    draft: bool
    head_sha: str
    edits: list[dict[str, Any]] = field(default_factory=list)
    readied: int = 0  # how many times the GraphQL mutation marked it ready for review


@dataclass
class FakeRepo:
    full_name: str
    origin: Path  # the bare repository pushes land in
    default_branch: str = "main"
    pulls: dict[int, FakePull] = field(default_factory=dict)
    comments: list[tuple[int, str]] = field(default_factory=list)  # (issue/PR number, body)
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # head sha → check runs


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: Any
    headers: dict[str, str]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, payload, headers = self.server.fake.handle(self.command, self.path, raw, dict(self.headers))
        body = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        self.send_header("content-type", "application/json; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer  # noqa: N815 - stdlib naming


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeGitHub


class FakeGitHub:
    """The fake REST API (see the module's docstring). Add repositories with `add_repo`."""

    def __init__(self, token: str = "ghp_FAKEtoken0123456789abcdefABCDEF0123") -> None:
        self.token = token
        self.repos: dict[str, FakeRepo] = {}
        self.calls: list[Call] = []
        self.unexpected: list[str] = []
        self._faults: list[tuple[str, int, dict[str, str]]] = []
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._checks_together: threading.Barrier | None = None

    def start(self) -> FakeGitHub:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        serve_in_thread(server, "fake-github")
        return self

    def close(self) -> None:
        if self._server is not None:
            stop_serving(self._server)
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # ---- scripting ------------------------------------------------------------------------
    def add_repo(self, full_name: str, origin: Path, default_branch: str = "main") -> FakeRepo:
        repo = self.repos[full_name.lower()] = FakeRepo(full_name, origin, default_branch)
        return repo

    def fail_next(self, path_contains: str, status: int, headers: dict[str, str] | None = None) -> None:
        """The next request whose path contains `path_contains` is answered `status` (with `headers`)."""
        with self._lock:
            self._faults.append((path_contains, status, headers or {}))

    def answer_check_runs_together(self, count: int) -> None:
        """The next `count` look-ups of check runs are held until all have come, then answered at once (as GitHub
        answers the look-ups of check events sent side by side); one that waits 10 s in vain is answered alone."""
        self._checks_together = threading.Barrier(count, timeout=10)

    def set_checks(self, full_name: str, sha: str, *runs: tuple[str, str, str | None]) -> None:
        """The check runs of a head: (name, status, conclusion) each."""
        self.repos[full_name.lower()].checks[sha] = [
            {
                "name": name,
                "status": status,
                "conclusion": conclusion,
                "html_url": f"https://github.example/{full_name}/runs/{i}",
                "output": {"title": f"{name}: {conclusion or status}", "summary": f"{name} {conclusion or status}"},
            }
            for i, (name, status, conclusion) in enumerate(runs, 1)
        ]

    def calls_to(self, method: str, path_contains: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and path_contains in c.path]

    async def await_for(self, predicate: Callable[[], T], timeout: float = 30.0) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (found := predicate()):
            if loop.time() > deadline:
                raise TimeoutError(f"the fake GitHub never saw what the test waited for; calls: {self.calls}")
            await asyncio.sleep(0.05)
        return found

    # ---- the API --------------------------------------------------------------------------
    def handle(self, method: str, target: str, raw: bytes, headers: dict[str, str]) -> tuple[int, Any, dict]:
        parts = urlsplit(target)
        path, query = parts.path.rstrip("/"), {k: v[0] for k, v in parse_qs(parts.query).items()}
        lowered = {k.lower(): v for k, v in headers.items()}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return 400, {"message": "Problems parsing JSON"}, {}
        with self._lock:
            self.calls.append(Call(method, parts.path + (f"?{parts.query}" if parts.query else ""), body, lowered))
            fault = next((f for f in self._faults if f[0] in path), None)
            if fault is not None:
                self._faults.remove(fault)
        if lowered.get("authorization") not in (f"token {self.token}", f"Bearer {self.token}"):
            return 401, {"message": "Bad credentials"}, {}
        if fault is not None:
            return fault[1], {"message": f"scripted {fault[1]}"}, fault[2]
        if method == "GET" and path == "/user":
            return 200, {"login": "agentlab-bot"}, {}
        if method == "POST" and path == "/graphql":
            return self._graphql(body)
        for pattern, handler in self._routes():
            if method == pattern[0] and (match := re.fullmatch(pattern[1], path)):
                repo = self.repos.get(f"{match['owner']}/{match['name']}".lower())
                if repo is None:
                    return 404, {"message": "Not Found"}, {}
                return handler(repo, match, query, body)
        self.unexpected.append(f"{method} {target}")
        return 404, {"message": f"not modelled by the fake: {method} {path}"}, {}

    def _routes(self) -> Iterator[tuple[tuple[str, str], Callable[..., tuple[int, Any, dict]]]]:
        repo = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"
        yield ("GET", repo), self._get_repo
        yield ("GET", repo + "/pulls"), self._list_pulls
        yield ("POST", repo + "/pulls"), self._create_pull
        yield ("GET", repo + r"/pulls/(?P<n>\d+)"), self._get_pull
        yield ("PATCH", repo + r"/pulls/(?P<n>\d+)"), self._update_pull
        yield ("POST", repo + r"/issues/(?P<n>\d+)/comments"), self._comment
        yield ("GET", repo + r"/commits/(?P<sha>[0-9a-f]{40})/check-runs"), self._check_runs

    def _graphql(self, body: Any) -> tuple[int, Any, dict]:
        """Only `markPullRequestReadyForReview(input: {pullRequestId: $id})` with `id` a pull request's node id."""
        query = str((body or {}).get("query") or "")
        variables = (body or {}).get("variables") or {}
        compact = " ".join(query.split())
        wanted = re.fullmatch(
            r"mutation(?: \w+)? ?\( ?\$(?P<var>\w+) ?: ?ID! ?\) ?\{ ?markPullRequestReadyForReview ?"
            r"\( ?input ?: ?\{ ?pullRequestId ?: ?\$(?P=var) ?\} ?\) ?\{ ?pullRequest ?\{[^{}]*\} ?\} ?\}",
            compact,
        )
        if wanted is None or set(variables) != {wanted["var"]}:
            self.unexpected.append(f"POST /graphql {compact[:200]} {variables}")
            return 200, {"errors": [{"message": "not modelled by the fake GitHub"}]}, {}
        for repo in self.repos.values():
            for pull in repo.pulls.values():
                if self._node_id(repo, pull) == variables[wanted["var"]]:
                    pull.draft = False
                    pull.readied += 1
                    found = {"number": pull.number, "isDraft": pull.draft}
                    return 200, {"data": {"markPullRequestReadyForReview": {"pullRequest": found}}}, {}
        self.unexpected.append(f"POST /graphql on an unknown node id {variables}")
        return 200, {"data": None, "errors": [{"type": "NOT_FOUND", "message": "Could not resolve to a node"}]}, {}

    @staticmethod
    def _node_id(repo: FakeRepo, pull: FakePull) -> str:
        return "PR_" + base64.urlsafe_b64encode(f"{repo.full_name}#{pull.number}".encode()).decode().rstrip("=")

    def _get_repo(self, repo: FakeRepo, match: re.Match, query: dict, body: Any) -> tuple[int, Any, dict]:
        permissions = {"admin": False, "maintain": False, "push": True, "triage": True, "pull": True}
        return 200, {"full_name": repo.full_name, "default_branch": repo.default_branch, "permissions": permissions}, {}

    def _pull_json(self, repo: FakeRepo, pull: FakePull) -> dict[str, Any]:
        return {
            "number": pull.number,
            "node_id": self._node_id(repo, pull),
            "html_url": f"https://github.example/{repo.full_name}/pull/{pull.number}",
            "title": pull.title,
            "body": pull.body,
            "draft": pull.draft,
            "state": "open",
            "head": {"ref": pull.head, "sha": pull.head_sha},
            "base": {"ref": pull.base},
        }

    def _list_pulls(self, repo: FakeRepo, match: re.Match, query: dict, body: Any) -> tuple[int, Any, dict]:
        owner, _, head = (query.get("head") or "").partition(":")
        found = [
            p for p in repo.pulls.values() if not head or (p.head == head and owner == repo.full_name.split("/")[0])
        ]
        return 200, [self._pull_json(repo, p) for p in found], {}

    def _branch_sha(self, repo: FakeRepo, branch: str) -> str | None:
        result = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            cwd=repo.origin,
            capture_output=True,
            text=True,
        )
        return result.stdout.strip() or None

    def _create_pull(self, repo: FakeRepo, match: re.Match, query: dict, body: Any) -> tuple[int, Any, dict]:
        missing = [k for k in ("title", "head", "base") if not (body or {}).get(k)]
        if missing:
            return (
                422,
                {"message": "Validation Failed", "errors": [{"code": "missing_field", "field": m} for m in missing]},
                {},
            )
        sha = self._branch_sha(repo, body["head"])
        if sha is None:
            return 422, {"message": "Validation Failed", "errors": [{"code": "invalid", "field": "head"}]}, {}
        if body["base"] != repo.default_branch:
            return 422, {"message": "Validation Failed", "errors": [{"code": "invalid", "field": "base"}]}, {}
        if any(p.head == body["head"] for p in repo.pulls.values()):
            return (
                422,
                {
                    "message": "Validation Failed",
                    "errors": [{"code": "custom", "message": "A pull request already exists"}],
                },
                {},
            )
        number = next(self._numbers)
        pull = repo.pulls[number] = FakePull(
            number, body["title"], body.get("body") or "", body["head"], body["base"], bool(body.get("draft")), sha
        )
        return 201, self._pull_json(repo, pull), {}

    def _get_pull(self, repo: FakeRepo, match: re.Match, query: dict, body: Any) -> tuple[int, Any, dict]:
        pull = repo.pulls.get(int(match["n"]))
        return (200, self._pull_json(repo, pull), {}) if pull else (404, {"message": "Not Found"}, {})

    def _update_pull(self, repo: FakeRepo, match: re.Match, query: dict, body: Any) -> tuple[int, Any, dict]:
        pull = repo.pulls.get(int(match["n"]))
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        pull.edits.append(dict(body or {}))
        pull.title = (body or {}).get("title", pull.title)
        pull.body = (body or {}).get("body", pull.body)
        pull.head_sha = self._branch_sha(repo, pull.head) or pull.head_sha
        return 200, self._pull_json(repo, pull), {}

    def _comment(self, repo: FakeRepo, match: re.Match, query: dict, body: Any) -> tuple[int, Any, dict]:
        if not (body or {}).get("body"):
            return 422, {"message": "Validation Failed", "errors": [{"code": "missing_field", "field": "body"}]}, {}
        repo.comments.append((int(match["n"]), body["body"]))
        n = len(repo.comments)
        return 201, {"id": n, "html_url": f"https://github.example/{repo.full_name}/issues/{match['n']}#c{n}"}, {}

    def _check_runs(self, repo: FakeRepo, match: re.Match, query: dict, body: Any) -> tuple[int, Any, dict]:
        if (together := self._checks_together) is not None:
            with contextlib.suppress(threading.BrokenBarrierError):
                together.wait()
        runs = repo.checks.get(match["sha"], [])
        return 200, {"total_count": len(runs), "check_runs": runs}, {}


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def send_webhook_event(
    url: str,
    event: str,
    payload: dict[str, Any],
    secret: str | None,
    delivery_id: str | None = None,
    signature: str | None = None,
) -> httpx.Response:
    """GitHub's side of a webhook event: a POST to the bot's /github, signed with `secret` (or `signature`)."""
    body = json.dumps(payload).encode()
    headers = {
        "content-type": "application/json",
        "x-github-event": event,
        "x-github-delivery": delivery_id or str(uuid.uuid4()),
        "user-agent": "GitHub-Hookshot/fake",
    }
    if signature is not None or secret is not None:
        headers["x-hub-signature-256"] = signature if signature is not None else sign(secret or "", body)
    async with httpx.AsyncClient(verify=client_tls()) as client:  # one CA bundle load per process
        return await client.post(url, content=body, headers=headers)


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    try:
        yield fake
    finally:
        fake.close()
    assert not fake.unexpected, f"calls the fake GitHub does not model: {fake.unexpected}"
