"""The review page through the real bot, seen in real headless Chromium at a phone's size: Telegram's launch data in
the URL fragment (signed here as Telegram signs it, with the fake Telegram's bot token), the task's verdict and diff
shown; nothing of the task for launch data signed with another token, too old, or of a member who may not see it;
Merge pressed on the page merges and the chat is told; the page's screenshot is not blank."""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from agents.core.models import Task, TaskStatus, WorkerKind
from agents.core.secrets_filter import SecretsFilter
from agents.git.diff import HUGE_FILE_BYTES, DiffReport
from agents.review import diff_view
from agents.review.pages import diff_page, templates
from tests.conftest import USER_ID, BotHarness, git, make_repo, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.github_server import FakeGitHub, fake_github  # noqa: F401  (fixture)
from tests.scripted import RoleScript
from tests.support.phone import CHROMIUM, THEME_DARK, close_browser, launch_data, mini_app_url, not_blank, phone
from tests.support.tasks import final_summary, start_task

MEMBER = 2002  # allowed, not an owner, and not in the owner's private chat
STRANGER = 3003  # not allowed at all
DAY = 86_400

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (Debian: apt install chromium)")


@pytest.fixture(scope="module", autouse=True)
def one_chromium_for_the_module() -> Iterator[None]:
    """The module's phones share one Chromium (started at the first phone), ended with the module."""
    yield
    close_browser()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def review_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    port = free_port()
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        allowed_user_ids=f"{USER_ID},{MEMBER}",
        owner_user_ids=str(USER_ID),
        review_url=f"http://127.0.0.1:{port}",
        review_listen=f"127.0.0.1:{port}",
    ) as bot:
        yield bot


async def finished_task(bot: BotHarness, model: RoleScript) -> tuple[int, object]:
    """A code task in the owner's private chat that fixes add() (the calc suite goes from red to green): calc's pytest
    file, whose per-test verdict the first test below sees on the page, or calc's quick check in the tests marked
    `quick_tests` (tests/conftest.py), which look at other things."""
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py: it subtracts."), claude_says.text("On it."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add(): it now adds."),
    )
    bot.say("fix add in calc")
    task, summary = await final_summary(bot, 1, timeout=120)
    return task.id, summary


def page_of(bot: BotHarness, task_id: int) -> str:
    return f"{bot.settings.review.review_url}/task/{task_id}"


@needs_chromium
async def test_the_review_page_shows_the_verdict_and_diff_only_to_whom_may_see_it_and_merges(
    review_bot: BotHarness, model: RoleScript
) -> None:
    bot = review_bot
    token = bot.tg.token
    task_id, summary = await finished_task(bot, model)
    review = [b for b in summary.buttons if "web_app" in b]
    assert review == [{"text": "🔍 Review", "web_app": {"url": page_of(bot, task_id)}}], summary.buttons
    now = time.time()
    async with phone() as device:
        seen = await device.open(
            mini_app_url(page_of(bot, task_id), launch_data(token, USER_ID, signed_at=now), THEME_DARK)
        )
        assert f"Task #{task_id} done" in seen, seen
        assert "passed" in seen and "fixed" in seen.lower(), seen  # the verdict: calc's failing test is fixed
        assert "test_calc.py::test_add" in seen, seen  # each test's outcome, by pytest's name for it
        assert "calc.py" in seen and "a + b" in seen and "a - b" in seen, seen  # the diff, both sides
        numbers = await device.evaluate(
            "Array.from(document.querySelectorAll('tr.add td.ln')).map(td => td.textContent)"
        )
        assert any(n.strip().isdigit() for n in numbers), numbers  # the added line has its new line number
        assert await device.evaluate("document.body.className") == "dark"  # Telegram's theme said dark
        assert await device.evaluate("document.querySelectorAll('.code span[class]').length") > 0  # highlighted
        assert await device.evaluate("document.documentElement.scrollWidth") <= 390 + 1  # no sideways scrolling
        assert await device.evaluate("document.querySelector('table.diff.split')") is None  # unified on a phone
        loaded = await device.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
        assert loaded and all(url.startswith(bot.settings.review.review_url) for url in loaded), loaded  # nothing else
        png = await device.screenshot()
        assert not_blank(png) > 20, "the page's screenshot is blank"
        if shot := os.environ.get("REVIEW_PAGE_SCREENSHOT"):  # the README's picture: make docs-screenshot
            Path(shot).write_bytes(png)

        # the page shows the API's refusal, whatever its reason: each reason (another bot's token, too old, a member
        # not in that chat, a stranger) is refused by the API itself in the test below, on the same requests
        forged = launch_data("123456:another-bots-token", USER_ID, signed_at=now)  # signed with another token
        seen = await device.open(mini_app_url(page_of(bot, task_id), forged))
        assert "This page shows nothing" in seen, seen
        assert "calc.py" not in seen and "a + b" not in seen and "Fix add" not in seen, seen

        await device.resize(1200, 900)  # a wide screen (a tablet, a desktop client): side by side
        seen = await device.open(mini_app_url(page_of(bot, task_id), launch_data(token, USER_ID, signed_at=now)))
        assert "a + b" in seen and "a - b" in seen, seen
        assert await device.evaluate("document.querySelectorAll('table.diff.split td.src.add').length") == 1
        before = len(bot.tg.messages(USER_ID))
        await device.evaluate("document.querySelector('button[data-action=merge]').click()")
        said = await device.until(
            "(t => t && t !== '…' ? t : '')(document.getElementById('said').textContent)", timeout=60
        )
        assert "merged" in said.lower(), said
    repo = bot.settings.paths.workspace_path / "calc"
    assert "a + b" in git(repo, "show", "main:calc.py")
    told = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID)[before:] if "review page" in (m.text or "")), None)
    )
    assert "merged" in told.text.lower(), told.text


async def api(bot: BotHarness, path: str, init_data: str | None, method: str = "GET") -> tuple[int, str]:
    headers = {"Authorization": f"tma {init_data}"} if init_data is not None else {}
    try:
        response = await AsyncHTTPClient().fetch(
            f"{bot.settings.review.review_url}{path}",
            method=method,
            headers=headers,
            body=b"" if method == "POST" else None,
        )
    except HTTPClientError as err:
        return err.code, err.response.body.decode() if err.response is not None else ""
    return response.code, response.body.decode()


@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_the_review_api_acts_on_nothing_for_forged_expired_or_other_users_data_and_pages_a_5_mb_diff(
    review_bot: BotHarness, model: RoleScript, tmp_path: Path
) -> None:
    """The API itself (what the page's script calls), played by a hostile client: every refusal says nothing of the
    task and changes nothing; a task id of another chat is as good as absent.

    Then the same task's branch grows by 5 MB of changes, a binary file and a Trojan-Source line: the page shows the
    first page of files and says how many pages there are, each page stays small, the binary file is named and not
    inlined, and the bidi controls are visible marks, never characters the browser would obey."""
    bot, token, now = review_bot, review_bot.tg.token, time.time()
    task_id, _ = await finished_task(bot, model)
    owner = launch_data(token, USER_ID, signed_at=now)
    status, body = await api(bot, f"/api/task/{task_id}", owner)
    assert status == 200 and "calc.py" in body and "✔ Task #1 done" in body, body
    tampered = owner.replace(f"%22id%22%3A{USER_ID}", f"%22id%22%3A{MEMBER}")
    assert tampered != owner
    other_chat = await bot.runtime.store.get_task(task_id)
    await bot.runtime.store.update_task(task_id, chat_id=-100777)  # now the task of a group the owner is not in
    try:
        status, body = await api(bot, f"/api/task/{task_id}", owner)
        assert status == 403 and "a + b" not in body and "not yours to see" in body, body
    finally:
        await bot.runtime.store.update_task(task_id, chat_id=other_chat.chat_id)
    for bad in (
        None,  # no launch data
        "",
        tampered,  # a field changed after signing
        launch_data("1:another", USER_ID, signed_at=now),
        launch_data(token, USER_ID, signed_at=now - 2 * DAY),
        launch_data(token, USER_ID, signed_at=now + DAY),  # from the future
        launch_data(token, MEMBER, signed_at=now),
        launch_data(token, STRANGER, signed_at=now),
    ):
        for path, method in (
            (f"/api/task/{task_id}", "GET"),
            (f"/api/task/{task_id}/diff?page=0", "GET"),
            (f"/api/task/{task_id}/picture/0", "GET"),
            (f"/api/task/{task_id}/merge", "POST"),
            (f"/api/task/{task_id}/discard", "POST"),
        ):
            status, body = await api(bot, path, bad, method)
            assert status == 403, (bad, path, status, body)
            assert "This page shows nothing" in body and "calc" not in body and "add" not in body.lower(), body
    task = await bot.runtime.store.get_task(task_id)
    repo = bot.settings.paths.workspace_path / "calc"
    assert task.branch in git(repo, "branch", "--list", task.branch), "a refused Discard deleted the branch"
    assert "a - b" in git(repo, "show", "main:calc.py"), "a refused Merge merged"
    status, shell = await api(bot, f"/task/{task_id}", None)
    assert status == 200 and "calc" not in shell and "Fix add" not in shell  # the page itself holds no task data
    assert "http" not in shell.replace(bot.settings.review.review_url, "")  # and loads nothing from elsewhere

    extra = tmp_path / "grow"  # the branch grows by 5 MB of changes, a binary file and a Trojan-Source line
    git(repo, "worktree", "add", "-q", str(extra), task.branch)
    for n in range(60):
        (extra / f"gen_{n:02}.py").write_text("".join(f"value_{i} = {i} * {n}  # generated\n" for i in range(2600)))
    (extra / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40)
    (extra / "access.py").write_text('if role != "user\u202e \u2066// admin\u2069 \u2066":\n    grant()\n')
    git(extra, "add", "-A")
    bot_commits = bot.settings.commits  # grown as a follow-up of the bot's would: Discard deletes only its commits
    name, email = bot_commits.git_author_name, bot_commits.git_author_email
    as_bot = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
    subprocess.run(["git", "commit", "-qm", "grow"], cwd=extra, env={**os.environ, **as_bot}, check=True)
    git(repo, "worktree", "remove", "--force", str(extra))
    size = len(git(repo, "diff", f"{task.base_commit}..{task.branch}").encode())
    assert size > 5_000_000, size
    status, first = await api(bot, f"/api/task/{task_id}", owner)
    assert status == 200 and "page 1 of" in first, first[:2000]
    pages = int(first.split("page 1 of ", 1)[1].split("<", 1)[0])
    assert pages >= 40 and len(first) < 3_000_000
    status, last = await api(bot, f"/api/task/{task_id}/diff?page={pages - 1}", owner)
    assert status == 200 and f"page {pages} of {pages}" in last and len(last) < 3_000_000
    assert "Binary file, not shown" in last and "logo.png" in last  # named after the last page's files, not inlined
    assert "access.py" in first and "⟨U+202E⟩" in first and "⟨U+2066⟩" in first  # the files come in name order
    assert not any(ch in first + last for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

    named = launch_data(token, USER_ID, signed_at=now, name="[x](http://evil.example)")  # a name is the user's words
    status, body = await api(bot, f"/api/task/{task_id}/discard", named, "POST")  # the owner's Discard acts
    assert status == 200 and "was discarded" in body, body
    assert task.branch not in git(repo, "branch", "--list", task.branch)
    told = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "from the review page" in (m.text or "")), None)
    )
    assert "discarded" in told.text and "[x](http://evil.example" in told.text, told.text  # shown literally
    assert not any(e.get("type") == "text_link" for e in told.entities or []), told.entities
    status, body = await api(bot, f"/api/task/{task_id}", owner)  # the verdict stays; the diff is gone, and says so
    assert status == 200 and "✔ Task #1 done" in body and "No diff" in body, body


@pytest.mark.skipif(shutil.which("git") is None, reason="git")
@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_a_member_pressing_merge_on_the_page_asks_the_owners(review_bot: BotHarness, model: RoleScript) -> None:
    """Merge on the page under the button's roles: a member's own task is theirs to see, but merging is an owner's
    decision: the member is told so, the owners get the request, nothing is merged."""
    bot, token, now = review_bot, review_bot.tg.token, time.time()
    model.add("orchestrator", start_task("calc", "Fix add()."), claude_says.text("On it."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed."),
    )
    bot.say("fix add", user_id=MEMBER)
    await bot.tg.await_for(lambda: any("Files:" in (m.text or "") for m in bot.tg.messages(MEMBER)), timeout=120)
    status, body = await api(bot, "/api/task/1", launch_data(token, MEMBER, signed_at=now, name="member"))
    assert status == 200 and "calc.py" in body, body
    status, body = await api(bot, "/api/task/1/merge", launch_data(token, MEMBER, signed_at=now), "POST")
    assert status == 200 and "only an owner can merge" in body.lower(), body
    assert "a - b" in git(bot.settings.paths.workspace_path / "calc", "show", "main:calc.py")
    await bot.tg.await_for(lambda: any("task:merge:1" in m.callback_data for m in bot.tg.messages(USER_ID)))


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_without_review_url_a_long_diff_also_comes_as_one_html_page(bot: BotHarness, model: RoleScript) -> None:
    """No review server: Diff sends the .diff as before, and for a long diff the same renderer's single HTML file,
    which a phone opens with nothing else to load; no summary has a Review button."""
    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(40))
    model.add("orchestrator", start_task("calc", "Add helpers."), claude_says.text("On it."))
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "helpers.py", "content": body}),
        claude_says.text("Added helpers.py."),
    )
    bot.say("add helpers to calc")
    _, summary = await final_summary(bot, 1, timeout=120)
    assert not any("web_app" in b or "url" in b for b in summary.buttons), summary.buttons
    bot.tg.press_button(USER_ID, summary.message_id, "task:diff:1")
    page = await bot.tg.await_for(
        lambda: next(
            (m for m in bot.tg.messages(USER_ID) if m.kind == "document" and m.filename.endswith(".html")), None
        )
    )
    diff = next(m for m in bot.tg.messages(USER_ID) if m.kind == "document" and m.filename == "task-1.diff")
    assert page.filename == "task-1.html" and b"+def f39(x):" in diff.data
    html = page.data.decode()
    assert "helpers.py" in html and html.count('class="add"') >= 160 and "<script" not in html
    assert "http://" not in html and "https://" not in html


GROUP = -1009000


@pytest.mark.quick_tests  # the verdict is not what this test is about
@needs_chromium
async def test_in_a_group_the_review_link_opens_the_mini_app_for_the_groups_members_only(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, model: RoleScript
) -> None:
    """A group gets a t.me link to the bot's Mini App (Telegram allows no web_app button there) whose start parameter
    names the task; the page at REVIEW_URL's root reads it from the signed launch data. Telegram says who is in the
    group: the member who started the task sees it; an owner who is not in the group does not, until they join."""
    port = free_port()
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        allowed_user_ids=f"{USER_ID},{MEMBER}",
        owner_user_ids=str(USER_ID),
        review_url=f"http://127.0.0.1:{port}/agentlab",
        review_listen=f"127.0.0.1:{port}",
        review_app_name="review",
    ) as bot:
        model.add("orchestrator", start_task("calc", "Fix add()."), claude_says.text("On it."))
        model.add(
            "code",
            claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
            claude_says.text("Fixed add()."),
        )
        bot.tg.send_text(MEMBER, "@test_bot fix add in calc", chat_id=GROUP, username="mia")
        summary = await bot.tg.await_for(
            lambda: next((m for m in bot.tg.messages(GROUP) if "Files:" in (m.text or "")), None), timeout=120
        )
        link = [b for b in summary.buttons if "url" in b]
        assert link == [{"text": "🔍 Review", "url": "https://t.me/test_bot/review?startapp=task_1"}], summary.buttons
        app = (
            bot.settings.review.review_url
        )  # BotFather's Mini App URL (REVIEW_URL itself): the page finds the task itself
        now = time.time()
        async with phone() as device:
            seen = await device.open(
                mini_app_url(app, launch_data(bot.tg.token, MEMBER, signed_at=now, name="mia", start_param="task_1"))
            )
            assert "Task #1 done" in seen and "calc.py" in seen, seen
            owner_data = launch_data(bot.tg.token, USER_ID, signed_at=now, start_param="task_1")
            seen = await device.open(mini_app_url(app, owner_data))
            assert "This page shows nothing" in seen and "calc.py" not in seen, seen  # not in the group
            bot.tg.chat_members[GROUP].add(USER_ID)
            seen = await device.open(mini_app_url(app, owner_data))
            assert "Task #1 done" in seen and "calc.py" in seen, seen


SITE_BEFORE = "<!doctype html><html><body style='margin:0;background:#ffffff'><h1>Shop</h1></body></html>\n"
SITE_AFTER = (
    "<!doctype html><html><body style='margin:0;background:#ffffff'><h1>Shop</h1>"
    "<div style='height:300px;background:#d0312d;color:#fff'>Sale: everything half price</div></body></html>\n"
)


@needs_chromium
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap: the pictures are taken in the task's sandbox")
async def test_a_frontend_task_sends_its_page_before_and_after_as_one_album_and_keeps_them_for_the_page(
    review_bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    bot = review_bot
    make_repo(workspace_root / "shop", {"index.html": SITE_BEFORE, "about.html": "<p>about</p>\n"})
    model.add(
        "orchestrator",
        start_task("shop", "Add a red sale banner under the title of index.html.", worker="frontend"),
        claude_says.text("On it."),
    )
    model.add(
        "frontend",
        claude_says.tool_use("write_file", {"path": "index.html", "content": SITE_AFTER}),
        claude_says.text("Added the sale banner."),
    )
    bot.say("add a sale banner to the shop")
    album = await bot.tg.await_for(
        lambda: (
            [
                m
                for m in bot.tg.messages(USER_ID)
                if m.kind == "photo" and (m.text or "").startswith(("Before", "After"))
            ]
            if len([m for m in bot.tg.messages(USER_ID) if m.kind == "photo"]) >= 2
            else None
        ),
        timeout=120,
    )
    before, after = album
    assert before.text.startswith("Before: index.html") and after.text.startswith("After: index.html"), album
    assert before.data != after.data and not_blank(after.data) > not_blank(before.data)  # the banner is in "after"
    summary = next(m for m in bot.tg.messages(USER_ID) if "Files:" in (m.text or ""))
    assert summary.message_id < before.message_id, "the album follows the summary"
    kept = await bot.runtime.store.reviews.pictures(1)
    assert [kind for kind, _, _ in kept] == ["before", "after"] and kept[1][2] == after.data
    async with phone() as device:
        seen = await device.open(
            mini_app_url(page_of(bot, 1), launch_data(bot.tg.token, USER_ID, signed_at=time.time()))
        )
        assert "Before: index.html" in seen and "After: index.html" in seen, seen
        shown = await device.until(
            "Array.from(document.querySelectorAll('img[data-picture]')).every(i => i.complete && i.naturalWidth > 0)"
            " && document.querySelectorAll('img[data-picture]').length"
        )
        assert shown == 2


@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_open_pr_from_the_page_opens_the_pull_request_and_tells_the_chat(
    fake_telegram, fake_anthropic, fake_github: FakeGitHub, tmp_path, workspace_root, bot_repo, model: RoleScript
) -> None:
    """A workspace on GitHub: the page offers Open PR beside Merge and Discard, and pressing it does what the
    summary's button does (the bot pushes the branch and opens the pull request); the chat gets the link."""
    calc = workspace_root / "calc"
    with (calc / ".agentlab.toml").open("a") as config:  # after calc's quick [tests]
        config.write('[github]\nrepository = "octo/calc"\n')
    git(calc, "add", ".agentlab.toml")
    git(calc, "commit", "-q", "-m", "on GitHub")
    origin = tmp_path / "calc-origin.git"
    git(workspace_root, "clone", "-q", "--bare", str(calc), str(origin))
    git(calc, "remote", "add", "origin", str(origin))
    fake_github.add_repo("octo/calc", origin)
    port = free_port()
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        github_token=fake_github.token,
        github_api_url=fake_github.url,
        sandbox_network="off",
        review_url=f"http://127.0.0.1:{port}",
        review_listen=f"127.0.0.1:{port}",
    ) as bot:
        task_id, summary = await finished_task(bot, model)
        assert f"task:pr:{task_id}" in summary.callback_data and any("web_app" in b for b in summary.buttons)
        owner = launch_data(bot.tg.token, USER_ID, signed_at=time.time())
        status, page = await api(bot, f"/api/task/{task_id}", owner)
        assert status == 200 and 'data-action="pr"' in page, page[:1500]
        assert not fake_github.calls_to("POST", "/pulls")
        status, body = await api(bot, f"/api/task/{task_id}/pr", owner, "POST")
        assert status == 200 and "Opened PR #1" in body, body
        assert fake_github.repos["octo/calc"].pulls[1]
        told = await bot.tg.await_for(
            lambda: next((m for m in bot.tg.messages(USER_ID) if "from the review page" in (m.text or "")), None)
        )
        assert "Opened PR #1" in told.text and "/octo/calc/pull/1" in told.text


KEY_SHAPE = "sk-ant-api03-" + "Q7w8E9r0T1y2U3i4O5p6" * 4  # bare (no quotes): the page's highlighting cuts it at `-`
PLANTS_A_KEY = (  # a file with the key, a Latin-1 byte (not UTF-8) before it, and enough lines to be a long diff
    "python3 -c \"open('keys.py', 'wb').write(b'caf\\\\xe9 = 1\\\\nKEY = "
    + KEY_SHAPE
    + "\\\\n' + b''.join(b'y%d = %d\\\\n' % (i, i) for i in range(100)))\""
)


async def _a_task_that_commits_a_key(bot: BotHarness, model: RoleScript) -> object:
    model.add("orchestrator", start_task("calc", "Add keys.py."), claude_says.text("On it."))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": PLANTS_A_KEY}),
        claude_says.text(f"Added keys.py with KEY = {KEY_SHAPE}"),
    )
    bot.say("add keys to calc")
    _, summary = await final_summary(bot, 1, timeout=120)
    return summary


@pytest.mark.untested_calc  # the verdict is not what this test is about
async def test_a_key_in_a_diff_is_masked_in_the_document_and_in_its_page(bot: BotHarness, model: RoleScript) -> None:
    """The Diff document and the single HTML page drawn from it: a byte that is not UTF-8 does not switch the masking
    off, and the page is drawn from the masked document (masking its HTML misses a key the highlighting cut up)."""
    summary = await _a_task_that_commits_a_key(bot, model)
    bot.tg.press_button(USER_ID, summary.message_id, "task:diff:1")
    page = await bot.tg.await_for(
        lambda: next(
            (m for m in bot.tg.messages(USER_ID) if m.kind == "document" and m.filename == "task-1.html"), None
        )
    )
    diff = next(m for m in bot.tg.messages(USER_ID) if m.kind == "document" and m.filename == "task-1.diff")
    assert b"+caf\xe9 = 1" in diff.data, "the bytes that are not a secret come as they are"
    assert b"Q7w8E9r0T1y2U3i4O5p6" not in diff.data and b"+KEY = \xc2\xabmasked\xc2\xbb" in diff.data, diff.data[:600]
    assert b"Q7w8E9r0T1y2U3i4O5p6" not in page.data and b"masked" in page.data and b"y99" in page.data


@pytest.mark.untested_calc
async def test_the_review_page_masks_the_diff_and_the_workers_report(review_bot: BotHarness, model: RoleScript) -> None:
    """The review page shows what the chat shows, masked the same way: the diff (each file before it is drawn) and
    the worker's report, which the summary in the chat masks too."""
    bot = review_bot
    summary = await _a_task_that_commits_a_key(bot, model)
    assert "Q7w8E9r0T1y2U3i4O5p6" not in (summary.text or "")
    owner = launch_data(bot.tg.token, USER_ID, signed_at=time.time())
    status, body = await api(bot, "/api/task/1", owner)
    assert status == 200 and "keys.py" in body and "y99" in body, body[:2000]
    assert "Q7w8E9r0T1y2U3i4O5p6" not in body and body.count("masked") >= 2, body[:4000]


async def test_a_task_on_self_shows_a_member_nothing_on_the_page_even_their_own(review_bot: BotHarness) -> None:
    """`self` is owners' alone: a task on the bot's own code that a member started while an owner (OWNER_USER_IDS
    changed since) shows them nothing on the review page, neither its verdict nor its pictures, as /task and the
    chat's Diff refuse them."""
    store, now = review_bot.runtime.store, time.time()
    task = await _ended_task(review_bot, MEMBER, "self", "SELF-TITLE the token handling")
    await store.reviews.save(task.stored_id, {"report": "SELF-REPORT: where the token lives"})
    await store.reviews.add_picture(task.stored_id, "SELF-CAPTION", b"\x89PNG\r\n\x1a\nSELF-PICTURE")
    member = launch_data(review_bot.tg.token, MEMBER, signed_at=now, name="member")
    for path in (f"/api/task/{task.id}", f"/api/task/{task.id}/picture/0"):
        status, body = await api(review_bot, path, member)
        assert status != 200 and "SELF-" not in body, (path, status, body[:200])


# ---- a hostile worker's text on the page: bounded, bidi controls shown, never framed by another site ----------------

BIDI_CHARS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_one_file_of_short_lines_makes_a_bounded_page() -> None:
    """A hostile worker commits one file of empty lines, under HUGE_FILE_BYTES (so write_diff inlines it): the page
    holding it stays as small as a page of any other diff (3 MB), not ~40 bytes of HTML per byte of patch (a 512 KB
    file would be ~60 MB of HTML, a minute of CPU): MAX_FILE_ROWS rows, then a note that Diff has the rest."""
    n = 100_000  # 100 KB of "\n": far below HUGE_FILE_BYTES
    assert n < HUGE_FILE_BYTES
    patch = (
        "diff --git a/blank.txt b/blank.txt\nnew file mode 100644\n--- /dev/null\n+++ b/blank.txt\n"
        + f"@@ -0,0 +1,{n} @@\n"
        + "+\n" * n
    ).encode()
    page = diff_page(io.BytesIO(patch), DiffReport(), 0, 100_000, SecretsFilter().mask)
    rows = sum(len(f.lines) for f in page.files)
    html = templates().load("diff_page.html").generate(**page.namespace())
    assert len(html) < 3_000_000, (len(patch), rows, len(html), page.page_count)
    assert rows == diff_view.MAX_FILE_ROWS + 1 and b"more rows not shown here: Diff has them" in html


def test_bidi_controls_in_file_names_are_shown_not_obeyed() -> None:
    """git runs with core.quotePath=off, so a file name's bidi controls reach the `diff --git` header raw: the page
    shows them as marks in the names (the file's, the binary and huge ones) as in the diff's lines, never obeyed."""
    name = "src/\u202eyp.tset_\u2066safe.py"
    patch = f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-x = 1\n+x = 2\n".encode()
    report = DiffReport(binary=["img/\u202egnp.exe"], huge=[("data/\u2067big.csv", 9_000_000)])
    page = diff_page(io.BytesIO(patch), report, 0, 100_000, SecretsFilter().mask)
    assert page.files and page.files[0].path == name
    html = templates().load("diff_page.html").generate(**page.namespace()).decode()
    assert not diff_view.BIDI.search(html), [hex(ord(c)) for c in html if c in BIDI_CHARS]


async def _ended_task(bot: BotHarness, user: int = USER_ID, workspace: str = "calc", title: str = "Fix add") -> Task:
    """A completed code task of `user`'s, stored as an ended task is (no review kept yet)."""
    return await bot.runtime.store.add_task(
        Task(
            chat_id=user,
            user_id=user,
            workspace=workspace,
            worker=WorkerKind.CODE,
            title=title,
            instructions="x",
            status=TaskStatus.COMPLETED,
        )
    )


async def _stored_task(bot: BotHarness) -> int:
    store = bot.runtime.store
    task = await _ended_task(bot)
    await store.reviews.save(
        task.stored_id,
        {
            "headline": "Task done",
            "tests_line": "1 failed",
            "tests": [{"id": "tests/test_\u202enimda_si_resu.py::test_ok", "outcome": "failed"}],
            "report": "All good \u2066// checked\u2069 \u202e.won ti egrem",
        },
    )
    await store.reviews.add_picture(task.stored_id, "After: \u202elmth.xedni", b"\x89PNG\r\n\x1a\n")
    return task.id


async def test_review_answers_forbid_framing_by_other_sites(review_bot: BotHarness) -> None:
    """Telegram Web shows a Mini App in an iframe of https://web.telegram.org: no other site may frame the page or
    its API answers (CSP frame-ancestors), so Merge cannot be clickjacked from elsewhere; a path that is none of the
    page's is refused with the same headers."""
    bot = review_bot
    task_id = await _stored_task(bot)
    owner = launch_data(bot.tg.token, USER_ID, signed_at=time.time())
    url = bot.settings.review.review_url
    signed = {"Authorization": f"tma {owner}"}
    paths = [(f"/task/{task_id}", {}), (f"/api/task/{task_id}", signed), ("/nothing-here", {})]
    paths += [(f"/api/task/{task_id}/nothing", signed), ("/static/other.js", {})]
    for path, headers in paths:
        response = await AsyncHTTPClient().fetch(f"{url}{path}", headers=headers, raise_error=False)
        assert response.code == (200 if "nothing" not in path and "other" not in path else 404), (path, response.code)
        csp = response.headers.get("Content-Security-Policy", "")
        ancestors = next((d.strip() for d in csp.split(";") if d.strip().startswith("frame-ancestors")), "")
        xfo = response.headers.get("X-Frame-Options", "")
        assert (ancestors and "*" not in ancestors.split()) or xfo, (path, csp, xfo)
        assert "tornado" not in response.headers.get("Server", "").lower(), "no answer names the server's software"


@pytest.mark.parametrize("page", ["%C2%B2", "%E2%91%A0", "-1", "abc", "9" * 12])
async def test_an_odd_page_number_is_a_page_never_a_server_error(review_bot: BotHarness, page: str) -> None:
    """`?page=` is the client's: "²" and "①" are digits to str.isdigit() but not to int(), and were a 500."""
    bot = review_bot
    task_id = await _stored_task(bot)
    owner = launch_data(bot.tg.token, USER_ID, signed_at=time.time())
    for path in (f"/api/task/{task_id}?page=", f"/api/task/{task_id}/diff?page="):
        as_first = await api(bot, f"{path}0", owner)
        assert await api(bot, f"{path}{page}", owner) == as_first, "an odd page number is the first page"


async def test_bidi_controls_in_test_names_report_and_captions_are_shown_not_obeyed(
    review_bot: BotHarness,
) -> None:
    """The worker names its tests, writes its report and its screenshots' captions: the task page shows their bidi
    controls as marks, as the diff's lines do."""
    bot = review_bot
    task_id = await _stored_task(bot)
    owner = launch_data(bot.tg.token, USER_ID, signed_at=time.time())
    response = await AsyncHTTPClient().fetch(
        f"{bot.settings.review.review_url}/api/task/{task_id}", headers={"Authorization": f"tma {owner}"}
    )
    body = response.body.decode()
    assert "test_" in body and "All good" in body and "After:" in body, body[:2000]
    assert not diff_view.BIDI.search(body), [hex(ord(c)) for c in body if c in BIDI_CHARS]
