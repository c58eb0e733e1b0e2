"""GitHub's parts one by one: which repository a workspace is on, retries, check lines, webhook signatures, the
settings, the token in the bot's own push (seen by a loopback HTTP server, and nowhere in git's config) and doctor."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gidgethub
import pytest

from agents.core.settings import Settings, SettingsError, load_settings
from agents.doctor import Level, check_github
from agents.git.command import GitError
from agents.git.remote import push_with_token
from agents.github.api import CheckRun, GitHubClient, GitHubUnavailable, graphql_url, retry_delay
from agents.github.repository import github_repository, name_from_config, name_from_url
from agents.github.webhook import event_key, verified_event
from agents.work.pull_requests import checks_line, gist, proposal_number
from tests.conftest import git, make_repo
from tests.fakes.github_server import FakeGitHub, FakePull, fake_github, sign  # noqa: F401  (fixture)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/octo/calc", "octo/calc"),
        ("https://github.com/octo/calc.git", "octo/calc"),
        ("git@github.com:octo/calc.git", "octo/calc"),
        ("ssh://git@github.com/octo/calc", "octo/calc"),
        ("https://user:secret@github.com/octo/my.repo.git", "octo/my.repo"),
        ("https://gitlab.com/octo/calc.git", None),
        ("/srv/git/calc.git", None),
        ("https://github.com/octo", None),
    ],
)
def test_a_github_remote_url_names_its_repository(url: str, name: str | None) -> None:
    assert name_from_url(url) == name


def test_the_config_names_a_repository_only_in_its_github_table() -> None:
    assert name_from_config('[github]\nrepository = "octo/calc"\n') == "octo/calc"
    assert name_from_config('[tests]\ncommand = "pytest"\n') is None
    assert name_from_config('[github]\nrepository = "not a name"\n') is None
    assert name_from_config("[github\n") is None


async def test_a_workspace_is_on_github_by_its_origin_or_its_config(tmp_path: Path) -> None:
    by_origin = make_repo(tmp_path / "a", {"x.py": "1\n"})
    git(by_origin, "remote", "add", "origin", "git@github.com:octo/a.git")
    repo = await github_repository(by_origin)
    assert repo is not None and repo.full_name == "octo/a" and repo.push_url == "https://github.com/octo/a.git"
    by_config = make_repo(tmp_path / "b", {".agentlab.toml": '[github]\nrepository = "octo/b"\n'})
    git(by_config, "remote", "add", "origin", str(tmp_path / "b-origin.git"))
    repo = await github_repository(by_config)
    assert repo is not None and repo.full_name == "octo/b" and repo.push_url == str(tmp_path / "b-origin.git")
    assert not repo.on_github, "an origin that is not GitHub's never gets the bot's token"
    assert await github_repository(make_repo(tmp_path / "c", {"x.py": "1\n"})) is None


async def test_a_committed_config_never_chooses_where_the_token_pushes_a_workspace_without_origin(
    tmp_path: Path,
) -> None:
    """No `origin`: a contributor's committed `[github] repository = "owner/private-infra"` would have the bot push
    the task's branch into the owner's other repository with GITHUB_TOKEN. Only the owner's untracked file may."""
    committed = make_repo(tmp_path / "a", {".agentlab.toml": '[github]\nrepository = "owner/private-infra"\n'})
    assert await github_repository(committed) is None
    owners = make_repo(tmp_path / "b", {"x.py": "1\n"})
    (owners / ".agentlab.toml").write_text('[github]\nrepository = "octo/b"\n')  # the owner's, never committed
    repo = await github_repository(owners)
    assert repo is not None and repo.full_name == "octo/b" and repo.push_url == "https://github.com/octo/b.git"


@pytest.mark.parametrize(
    "origin", ["https://github.com/octo/calc", "https://github.com/octo/calc.git", "git@github.com:octo/calc.git"]
)
async def test_a_github_com_origin_names_the_repository_whatever_github_api_url_is(tmp_path: Path, origin: str) -> None:
    """A github.com origin is a GitHub URL with GITHUB_API_URL naming a test server or GitHub Enterprise too; the
    branch is pushed to that server (the one the token is for), and its own host is recognised beside github.com."""
    repo = make_repo(tmp_path / "r", {"x.py": "1\n"})
    git(repo, "remote", "add", "origin", origin)
    found = await github_repository(repo, "http://127.0.0.1:9")
    assert found is not None and found.full_name == "octo/calc", origin
    assert found.push_url == "http://127.0.0.1:9/octo/calc.git" and found.on_github
    assert name_from_url("https://ghe.example.com/octo/calc.git", "https://ghe.example.com") == "octo/calc"
    assert name_from_url("https://ghe.example.com/octo/calc.git") is None, "another host is GitHub only when named"


@pytest.mark.parametrize(
    "origin",
    [
        "http://github.com/octo/calc.git",  # a careless user's remote: the token would travel in clear text
        "https://GitHub.com/octo/calc",  # host names know no case
        "git@GitHub.com:octo/calc.git",
        "https://someone@github.com/octo/calc.git",
    ],
)
async def test_a_github_origin_in_any_form_is_pushed_to_over_https(tmp_path: Path, origin: str) -> None:
    repo = make_repo(tmp_path / "r", {"x.py": "1\n"})
    git(repo, "remote", "add", "origin", origin)
    found = await github_repository(repo)
    assert found is not None and found.full_name == "octo/calc", origin
    assert found.push_url == "https://github.com/octo/calc.git" and found.on_github


def test_retries_follow_what_github_says() -> None:
    assert retry_delay(429, {"Retry-After": "3"}, 1) == 3.0
    assert retry_delay(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1010"}, 1, now=1000.0) == 11.0
    assert retry_delay(403, {}, 1) is None  # a permission error is not retried
    assert retry_delay(502, {}, 1) == 1.0 and retry_delay(502, {}, 3) == 4.0
    assert retry_delay(404, {}, 1) is None and retry_delay(422, {}, 1) is None


def test_the_checks_line_waits_for_every_run_and_names_the_failed_ones() -> None:
    def run(name: str, status: str = "completed", conclusion: str | None = "success") -> CheckRun:
        return CheckRun(name, status, conclusion, "u")

    url = "https://github.com/o/r/pull/12"
    assert checks_line(12, url, []) is None
    assert checks_line(12, url, [run("lint", "in_progress", None)]) is None
    assert (
        checks_line(12, url, [run("lint", conclusion="failure"), run("tests")])
        == f"CI on [PR #12]({url}): ✗ lint failed"
    )
    assert (
        checks_line(12, url, [run("tests"), run("docs", conclusion="skipped")])
        == f"CI on [PR #12]({url}): ✔ 2 checks passed"
    )


def test_a_webhook_event_needs_a_good_sha256_signature() -> None:
    body = json.dumps({"zen": "hi"}).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "ping", "X-GitHub-Delivery": "d1"}
    good = verified_event({**headers, "X-Hub-Signature-256": sign("s3cret", body)}, body, "s3cret")
    assert (good.delivery_id, good.event, json.loads(good.payload)) == ("d1", "ping", {"zen": "hi"})
    assert good.id == "ping:sha256:" + hashlib.sha256(body).hexdigest(), "a body about nothing named: its digest"
    for bad in ({**headers, "X-Hub-Signature-256": sign("other", body)}, headers):
        with pytest.raises(gidgethub.ValidationFailure):
            verified_event(bad, body, "s3cret")
    forged = sign("other", body)
    for lacking in ({"X-Hub-Signature-256": forged}, {"Content-Type": "text/plain", "X-Hub-Signature-256": forged}):
        with pytest.raises(gidgethub.ValidationFailure):  # a forged request is a 401 whatever else it lacks
            verified_event(lacking, body, "s3cret")
    with pytest.raises(gidgethub.BadRequest):  # signed, but no GitHub event: a 400
        verified_event(
            {"Content-Type": "application/json", "X-Hub-Signature-256": sign("s3cret", body)}, body, "s3cret"
        )
    import hmac

    sha1 = "sha1=" + hmac.new(b"s3cret", body, hashlib.sha1).hexdigest()
    with pytest.raises(gidgethub.ValidationFailure):  # the old SHA-1 header alone is not enough
        verified_event({**headers, "X-Hub-Signature": sha1}, body, "s3cret")
    with pytest.raises(gidgethub.ValidationFailure):  # nor a SHA-1 MAC in the SHA-256 header (gidgethub takes it)
        verified_event({**headers, "X-Hub-Signature-256": sha1}, body, "s3cret")


def _settings(**values: object) -> Settings:
    base = dict(telegram_bot_token="1:x", anthropic_api_key="k", allowed_user_ids="1001", workspace_path="/tmp")
    return load_settings(_env_file=None, **{**base, **values})


def test_github_settings_are_checked_with_one_clear_line() -> None:
    s = _settings(github_users="OctoCat=1001, hub-bot = 2002", github_webhook_listen="", github_token="")
    assert s.github.github_users == {"octocat": 1001, "hub-bot": 2002} and s.github.github_token is None
    assert s.github.github_web_url == "https://github.com"
    assert _settings(github_api_url="https://ghe.example/api/v3/").github.github_web_url == "https://ghe.example"
    with pytest.raises(SettingsError, match="GITHUB_USERS: must be login=telegram_user_id pairs"):
        _settings(github_users="octocat")
    with pytest.raises(SettingsError, match="GITHUB_WEBHOOK_SECRET: required when GITHUB_WEBHOOK_LISTEN"):
        _settings(github_webhook_listen="127.0.0.1:8088")
    with pytest.raises(SettingsError, match="GITHUB_WEBHOOK_LISTEN: must be host:port"):
        _settings(github_webhook_listen="8088", github_webhook_secret="x")
    # the review page's server binds REVIEW_LISTEN (default 127.0.0.1:8088) once REVIEW_URL is set: one of two
    # servers on one address could not listen
    review = dict(review_url="https://bot.example.com/review", github_webhook_secret="x")
    with pytest.raises(SettingsError, match=r"^configuration error: GITHUB_WEBHOOK_LISTEN and REVIEW_LISTEN are both"):
        _settings(github_webhook_listen="127.0.0.1:8088", **review)
    assert _settings(github_webhook_listen="127.0.0.1:8089", **review).github.github_webhook_listen == "127.0.0.1:8089"
    assert _settings(github_webhook_listen="127.0.0.1:8088", github_webhook_secret="x").review.review_url is None


class _Recorder(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        type(self).seen.append(self.headers.get("Authorization") or "")
        self.send_response(403)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


async def test_the_bots_push_sends_the_token_as_a_header_and_stores_it_nowhere(tmp_path: Path) -> None:
    token = "ghp_PUSHtoken0123456789abcdefABCDEF01234"
    repo = make_repo(tmp_path / "calc", {"calc.py": "1\n"})
    git(repo, "branch", "agentlab/task-1-x")
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/octo/calc.git"
        with pytest.raises(GitError) as refused:  # the recorder refuses the push after reading its header
            await push_with_token(repo, "agentlab/task-1-x", url, token)
    finally:
        server.shutdown()
        server.server_close()
    expected = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert _Recorder.seen and set(_Recorder.seen) == {expected}
    assert token not in str(refused.value)
    config = (repo / ".git" / "config").read_text()
    assert token not in config and "extraheader" not in config.lower()


async def test_doctor_checks_the_token_and_each_workspaces_repository(tmp_path: Path, fake_github: FakeGitHub) -> None:
    root = tmp_path / "workspaces"
    calc = make_repo(root / "calc", {"x.py": "1\n"})
    (calc / ".agentlab.toml").write_text('[github]\nrepository = "octo/calc"\n')  # the owner's: no origin to read
    make_repo(root / "notes", {"a.md": "a\n"})
    fake_github.add_repo("octo/calc", calc)
    settings = _settings(workspace_path=str(root), github_token=fake_github.token, github_api_url=fake_github.url)
    checks = await check_github(settings)
    assert [c.level for c in checks] == [Level.ok] * 4
    assert "acting as agentlab-bot" in checks[0].detail and checks[1].detail.startswith("calc → octo/calc")
    assert checks[2].detail.startswith("mentions: nobody's (GITHUB_USERS unset")
    assert checks[3].name == "GitHub webhook" and checks[3].detail.startswith("off (GITHUB_WEBHOOK_LISTEN unset")
    bad = await check_github(_settings(workspace_path=str(root), github_token="nope", github_api_url=fake_github.url))
    assert bad[0].level is Level.fail and "401" in bad[0].detail
    [off] = await check_github(_settings(workspace_path=str(root))) or []
    assert off.level is Level.ok and off.detail.startswith("off (GITHUB_TOKEN unset")
    out = io.StringIO()
    for check in checks:
        print(*check.lines(), file=out)
    assert "GITHUB_TOKEN accepted" in out.getvalue()


@pytest.mark.parametrize(
    ("api", "endpoint"),
    [
        ("https://api.github.com", "https://api.github.com/graphql"),
        ("https://ghe.example.com/api/v3/", "https://ghe.example.com/api/graphql"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/graphql"),
    ],
)
def test_the_graphql_endpoint_follows_the_rest_root(api: str, endpoint: str) -> None:
    assert graphql_url(api) == endpoint


async def test_a_draft_is_marked_ready_by_graphql_and_any_other_query_is_unexpected(tmp_path: Path) -> None:
    fake = FakeGitHub().start()
    client = GitHubClient(fake.token, fake.url)
    try:
        repo = fake.add_repo("octo/calc", tmp_path)
        repo.pulls[5] = FakePull(5, "t", "b", "agentlab/x", "main", True, "0" * 40)
        node = fake._pull_json(repo, repo.pulls[5])["node_id"]
        assert await client.mark_ready_for_review(node) is False
        assert repo.pulls[5].draft is False and repo.pulls[5].readied == 1 and not fake.unexpected
        with pytest.raises(GitHubUnavailable, match="GraphQL"):
            await client._graphql("query { viewer { login } }")
        assert fake.unexpected and "viewer" in fake.unexpected[0], "the strict fake names the unexpected query"
    finally:
        await client.close()
        fake.close()


def test_a_proposals_gist_is_its_opening_paragraphs_and_its_number_comes_from_the_result() -> None:
    body = "First paragraph.\n\n" + "x" * 2000 + "\n\nLast."
    assert gist(body) == "First paragraph."
    assert gist("y" * 3000).endswith("…") and len(gist("y" * 3000)) == 1500
    assert proposal_number("proposal #12") == 12 and proposal_number("done") is None and proposal_number(None) is None


def test_a_webhook_events_key_is_what_it_is_about_not_its_unsigned_id() -> None:
    comment = {"action": "created", "comment": {"id": 5}, "issue": {"id": 9}}
    review = {"action": "submitted", "review": {"id": 6}, "pull_request": {"id": 10}}
    assert event_key("issue_comment", comment, b"x") == "issue_comment:comment:5:created"
    assert event_key("issue_comment", {**comment, "action": "edited"}, b"x") == "issue_comment:comment:5:edited"
    assert event_key("pull_request_review", review, b"x") == "pull_request_review:review:6:submitted"
    assert event_key("issues", {"action": "opened", "issue": {"id": 9}}, b"x") == "issues:issue:9:opened"
    body = json.dumps(comment).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "issue_comment"}
    ids = {
        verified_event({**headers, "X-GitHub-Delivery": d, "X-Hub-Signature-256": sign("s", body)}, body, "s").id
        for d in ("d1", "d2")
    }
    assert ids == {"issue_comment:comment:5:created"}
