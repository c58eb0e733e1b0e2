"""Probes (hostile model, hostile member): where does text that must stay hidden reach someone?

Each test asserts the SAFE behaviour: a failure is a defect.
"""

from __future__ import annotations

import html
import shutil
import sys
import unicodedata

import pytest

from agents.core.secrets_filter import MASK, SecretsFilter
from agents.core.text import outside_text
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import start_task

KEY = "sk-ant-api03-Own-Key-Of-The-Bot-7781-abcdefghijkl"
TG = "987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX"
GHP = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"  # a GitHub classic token shape (36 after the prefix)
OWN_UNDERSCORED = "mcp_token_Zx81_NOT_A_SHAPE_4417"  # an MCP server env token the bot adds verbatim


def _filter() -> SecretsFilter:
    f = SecretsFilter()
    f.add([KEY, TG, OWN_UNDERSCORED])
    return f


def _chat_shows(markdown: str, f: SecretsFilter) -> str:
    """What a chat member reads: send_markdown masks the Markdown, then renders it to Telegram HTML."""
    from telegram_bot.render.chunks import html_to_text, render_chunks

    return "".join(html_to_text(c) for c in render_chunks(f.mask(markdown), 4096))


# ---- (1) the bot's own Markdown escaping runs BEFORE the mask ---------------------------------------------------
@pytest.mark.parametrize("secret", [GHP, "github_pat_11AAAAAAA0abcdefghij_klmnopqrstuvwxyz0123456789", OWN_UNDERSCORED])
def test_outside_text_escaping_does_not_hide_a_secret_from_the_mask(secret: str) -> None:
    """A worker's ask_user question, a GitHub title, a schedule's words: `outside_text` backslash-escapes `_` first,
    then send_markdown masks, then the renderer drops the backslashes again."""
    shown = _chat_shows(f"task asks: use {outside_text(secret)} ?", _filter())
    assert secret not in shown, f"the chat shows {shown!r}"


def test_an_ask_user_option_button_label_is_masked() -> None:
    from agents.store.standing import AskedQuestion
    from agents.work.questions import question_buttons
    from telegram_bot.replies import keyboard

    q = AskedQuestion(task_id=1, chat_id=USER_ID, question="which?", options=[TG, "other"], id=3)
    markup = keyboard(question_buttons(q), USER_ID)
    labels = [b.text for row in markup.inline_keyboard for b in row]
    assert not any(TG in label for label in labels), labels


@pytest.mark.skipif(shutil.which("bwrap") is None or not sys.platform.startswith("linux"), reason="needs bwrap")
@pytest.mark.untested_calc
@pytest.mark.settings(ask_timeout_seconds=3)
async def test_e2e_a_workers_question_shows_no_token_in_text_or_buttons(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("calc", "Ask."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("ask_user", {"question": f"Push with {GHP} ?", "options": [TG, "no"]}),
        claude_says.text("Done."),
    )
    bot.say("ask me in calc")
    question = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "asks you" in (m.text or "")), None), timeout=60
    )
    labels = [b.get("text", "") for b in question.buttons]
    assert GHP not in (question.text or ""), question.text
    assert not any(TG in label for label in labels), labels


# ---- (2) Markdown the model writes that renders to the secret ---------------------------------------------------
@pytest.mark.parametrize(
    "written",
    [
        KEY.replace("-", "\\-"),  # CommonMark backslash escapes of punctuation
        TG.replace(":", "\\:"),
        KEY[:14] + "**" + KEY[14:20] + "**" + KEY[20:],  # emphasis inside the key
        OWN_UNDERSCORED.replace("_", "\\_"),
    ],
    ids=["key-backslash", "token-backslash", "key-emphasis", "own-backslash"],
)
def test_markdown_that_renders_to_a_secret_is_masked(written: str) -> None:
    shown = _chat_shows(f"here: {written} done", _filter())
    for secret in (KEY, TG, OWN_UNDERSCORED):
        assert secret not in shown, f"{written!r} shows {shown!r}"


@pytest.mark.untested_calc
@pytest.mark.settings(anthropic_api_key=KEY)
async def test_e2e_the_models_answer_with_an_escaped_key_reaches_the_chat_masked(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", claude_says.text("The key is " + KEY.replace("-", "\\-") + " there."))
    bot.say("what is your key")
    await bot.tg.await_for(lambda: any("there" in (m.text or "") for m in bot.tg.messages(USER_ID)), timeout=30)
    texts = [v.text or "" for m in bot.tg.messages(USER_ID) for v in m.history] + [
        m.text or "" for m in bot.tg.messages(USER_ID)
    ]
    assert not any(KEY in t for t in texts), texts


# ---- (3) HTML entities (GitHub comments and the review page render them) -----------------------------------------
@pytest.mark.parametrize(
    "written", [KEY.replace("-", "&#45;"), TG.replace(":", "&#58;"), TG.replace(":", "&colon;"), KEY.replace("-", "&#x2d;")]
)
def test_an_html_entity_encoded_secret_is_masked(written: str) -> None:
    out = _filter().mask(f"see {written} here")
    assert KEY not in html.unescape(out) and TG not in html.unescape(out), out


# ---- (4) invisible characters the folded view does not know ----------------------------------------------------
@pytest.mark.parametrize(
    "invisible",
    ["\u200e", "\u200f", "\u2062", "\u2066", "\u202a", "\u034f", "\ufe0f", "\U000e0020"],
    ids=["LRM", "RLM", "invisible-times", "LRI", "LRE", "CGJ", "VS16", "tag-space"],
)
def test_a_key_with_other_invisible_characters_between_letters_is_masked(invisible: str) -> None:
    written = invisible.join(KEY)
    out = _filter().mask(written)
    visible = "".join(c for c in out if unicodedata.category(c) not in ("Cf", "Mn", "Zl") and c != "\U000e0020")
    assert KEY not in visible, repr(out[:80])


def test_the_mask_marker_itself_is_sane() -> None:
    assert _filter().mask(KEY) == MASK


# ---- (5) a member's reach of `self` by look-alike names and links (held: kept short) ------------------------------
def test_names_and_links_that_mean_the_bots_code_are_self(tmp_path) -> None:
    import os

    from agents.workspaces.folders import WorkspaceNotFound, Workspaces
    from tests.conftest import git

    bot = tmp_path / "bot"
    (bot / "agents").mkdir(parents=True)
    git(bot, "init", "-q")
    root = tmp_path / "ws"
    (root / "calc").mkdir(parents=True)
    os.symlink(bot / "agents", root / "Agents-Lib")  # a link to a folder inside the bot's checkout
    os.symlink(bot, root / "SELF")  # the reserved name in another case
    ws = Workspaces(root, bot)
    for name in ("self", "SELF", " self/ ", "Self\\", "the bot", "Agents-Lib", "agents lib", "AgentLab"):
        try:
            assert ws.resolve(name).is_self, name
        except WorkspaceNotFound:  # refused as ambiguous: safe too
            pass
    assert {w.name for w in ws.all() if not w.is_self} == {"calc"}
