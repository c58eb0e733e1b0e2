"""The bot's GitHub REST client: gidgethub over httpx, with retries for rate limits and GitHub's own errors.

gidgethub raises on every non-2xx answer and offers `handle_rate_limit_error` as the place to retry: a 403/429 with
`retry-after` or an exhausted `x-ratelimit-remaining` waits as GitHub says (up to MAX_WAIT_SECONDS), a 5xx is retried
with back-off, at most MAX_ATTEMPTS in all. What is left is one `GitHubUnavailable` with a sentence for the chat;
the token never appears in it (nor in a log line: requests are not logged).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import gidgethub
import gidgethub.httpx
import httpx2 as httpx

from agents.core.tls import client_tls

USER_AGENT = "agentlab"
BOT_MARK = "<!-- agentlab -->"  # on every comment the bot writes, so none is ever read back as a request
MAX_ATTEMPTS = 4
MAX_WAIT_SECONDS = 60.0
TIMEOUT_SECONDS = 30.0


class GitHubUnavailable(RuntimeError):
    """GitHub could not be reached or refused the call; the message is one sentence for the chat. `status`: the
    HTTP status GitHub answered (401: the token is refused), None when it was not reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def retry_delay(status: int, headers: Mapping[str, str], attempt: int, now: float | None = None) -> float | None:
    """How long to wait before retrying a failed call, or None when it should not be retried."""
    lowered = {k.lower(): v for k, v in headers.items()}
    after = lowered.get("retry-after", "").strip()
    if (status in (403, 429) or status >= 500) and after.isdigit():
        return float(after)
    if status in (403, 429):
        if lowered.get("x-ratelimit-remaining") == "0" and (reset := lowered.get("x-ratelimit-reset", "")).isdigit():
            return max(0.0, float(reset) - (time.time() if now is None else now)) + 1.0
        return None
    if status >= 500:
        return min(2.0 ** (attempt - 1), 8.0)
    return None


class _API(gidgethub.httpx.GitHubAPI):
    """gidgethub's httpx client, retrying what GitHub asks to be retried (see the module's docstring)."""

    async def handle_rate_limit_error(
        self, *, method: str, url: str, exception: gidgethub.HTTPException, attempt: int
    ) -> bool:
        delay = retry_delay(int(exception.status_code), exception.headers, attempt)
        if delay is None or attempt >= MAX_ATTEMPTS or delay > MAX_WAIT_SECONDS:
            return False
        await self.sleep(delay)
        return True


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str  # the page a person opens (html_url)
    draft: bool
    head_sha: str = ""
    node_id: str = ""  # the GraphQL id (marking a draft ready for review is GraphQL-only)


@dataclass(frozen=True)
class CheckRun:
    name: str
    status: str  # queued, in_progress, completed
    conclusion: str | None  # success, failure, neutral, cancelled, skipped, timed_out, action_required
    url: str
    summary: str = ""


def _pull(data: Mapping[str, Any]) -> PullRequest:
    return PullRequest(
        number=int(data["number"]),
        url=str(data["html_url"]),
        draft=bool(data.get("draft")),
        head_sha=str((data.get("head") or {}).get("sha") or ""),
        node_id=str(data.get("node_id") or ""),
    )


def graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint for a REST root: api.github.com/graphql; a GitHub Enterprise server's /api/v3 has
    its GraphQL at /api/graphql; any other root (a test server) serves it at <root>/graphql."""
    root = api_url.rstrip("/")
    if root.endswith("/api/v3"):
        return root.removesuffix("/v3") + "/graphql"
    return root + "/graphql"


MARK_READY = """
mutation MarkReady($id: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $id}) {
    pullRequest { number isDraft }
  }
}
""".strip()


class GitHubClient:
    """The REST calls the bot makes, each answering plain records; one httpx client for the bot's life."""

    def __init__(self, token: str, api_url: str = "https://api.github.com") -> None:
        self._http = httpx.AsyncClient(timeout=TIMEOUT_SECONDS, verify=client_tls())  # the process's one TLS context
        self._api = _API(self._http, USER_AGENT, oauth_token=token, base_url=api_url.rstrip("/"))
        self._graphql_url = graphql_url(api_url)

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, url: str, data: Any = b"", url_vars: Mapping[str, Any] | None = None) -> Any:
        try:
            if method == "GET":
                return await self._api.getitem(url, url_vars or {})
            call = {"POST": self._api.post, "PATCH": self._api.patch}[method]
            return await call(url, url_vars or {}, data=data)
        except gidgethub.HTTPException as err:
            status = int(err.status_code)
            detail = str(err.args[1]) if len(err.args) > 1 else err.status_code.phrase
            raise GitHubUnavailable(f"GitHub answered {status} ({detail})", status) from None
        except gidgethub.GitHubException as err:
            raise GitHubUnavailable(f"GitHub refused the call ({err})") from None
        except (TimeoutError, httpx.HTTPError, OSError) as err:
            raise GitHubUnavailable(f"GitHub could not be reached ({type(err).__name__})") from None

    async def _graphql(self, query: str, **variables: Any) -> Any:
        """One GraphQL call (gidgethub's `graphql`), its errors turned into GitHubUnavailable like REST's."""
        try:
            return await self._api.graphql(query, endpoint=self._graphql_url, **variables)
        except gidgethub.GraphQLException as err:
            detail = getattr(err, "response", None) or err
            raise GitHubUnavailable(f"GitHub's GraphQL API refused the call ({str(detail)[:200]})") from None
        except gidgethub.HTTPException as err:
            raise GitHubUnavailable(f"GitHub answered {int(err.status_code)}") from None
        except gidgethub.GitHubException as err:
            raise GitHubUnavailable(f"GitHub refused the call ({err})") from None
        except (TimeoutError, httpx.HTTPError, OSError) as err:
            raise GitHubUnavailable(f"GitHub could not be reached ({type(err).__name__})") from None

    async def user(self) -> str:
        """The token's own login (a token GitHub does not accept raises GitHubUnavailable with its 401)."""
        return str((await self._call("GET", "/user")).get("login") or "?")

    async def repository(self, full_name: str) -> dict[str, Any]:
        """The repository's record: `default_branch`, `permissions` (what the token may do), …"""
        return cast(dict[str, Any], await self._call("GET", f"/repos/{full_name}"))

    async def default_branch(self, full_name: str) -> str:
        return str((await self.repository(full_name))["default_branch"])

    async def open_pull_request(
        self, full_name: str, head: str, base: str, title: str, body: str, draft: bool
    ) -> PullRequest:
        """The open pull request of `head` if there is one (a retry after a lost answer), else a new one."""
        owner = full_name.split("/", 1)[0]
        found = await self._call(
            "GET", f"/repos/{full_name}/pulls{{?state,head}}", url_vars={"state": "open", "head": f"{owner}:{head}"}
        )
        if found:
            return _pull(found[0])
        data = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
        return _pull(await self._call("POST", f"/repos/{full_name}/pulls", data))

    async def update_pull_request(self, full_name: str, number: int, title: str, body: str) -> PullRequest:
        return _pull(await self._call("PATCH", f"/repos/{full_name}/pulls/{number}", {"title": title, "body": body}))

    async def mark_ready_for_review(self, node_id: str) -> bool:
        """Turn a draft pull request ready for review (REST cannot: it is the GraphQL mutation
        markPullRequestReadyForReview); whether it is a draft afterwards."""
        data = await self._graphql(MARK_READY, id=node_id)
        return bool((((data or {}).get("markPullRequestReadyForReview") or {}).get("pullRequest") or {}).get("isDraft"))

    async def pull_request(self, full_name: str, number: int) -> dict[str, Any]:
        return cast(dict[str, Any], await self._call("GET", f"/repos/{full_name}/pulls/{number}"))

    async def comment(self, full_name: str, number: int, body: str) -> str:
        """A comment on an issue or pull request; its URL."""
        made = await self._call("POST", f"/repos/{full_name}/issues/{number}/comments", {"body": f"{BOT_MARK}\n{body}"})
        return str(made.get("html_url") or "")

    async def check_runs(self, full_name: str, sha: str) -> list[CheckRun]:
        data = await self._call("GET", f"/repos/{full_name}/commits/{sha}/check-runs?per_page=100")
        return [
            CheckRun(
                name=str(run.get("name") or "check"),
                status=str(run.get("status") or ""),
                conclusion=run.get("conclusion"),
                url=str(run.get("html_url") or ""),
                summary=str((run.get("output") or {}).get("summary") or (run.get("output") or {}).get("title") or ""),
            )
            for run in data.get("check_runs", [])
        ]
