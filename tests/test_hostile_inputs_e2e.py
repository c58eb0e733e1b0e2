"""Hostile files sent to the chat, end to end through the fake Bot API and Messages API.

- A 48 KB PNG declaring 400 megapixels (a decompression bomb) gets one sentence, and its caption still reaches Claude.
- A document the API refuses (400 invalid_request_error about the PDF) is named to the user, dropped from the
  conversation, and the turn is answered without it; the next message is answered normally, without the document.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, role_of
from tests.support.attachments import answered, blocks_of, decompression_bomb, minimal_pdf


@pytest.mark.parametrize("sent_as", ["document", "photo"])
async def test_a_decompression_bomb_gets_one_sentence_and_the_caption_reaches_claude(
    bot: BotHarness, model: RoleScript, sent_as: str
) -> None:
    bomb = decompression_bomb()
    assert len(bomb) < 60_000
    model.add("orchestrator", claude_says.text("Answered without the picture."))
    if sent_as == "document":
        bot.tg.send_document(USER_ID, bomb, "plan.png", "image/png", caption="what does this plan show?")
    else:
        bot.tg.send_photo(USER_ID, bomb, width=1280, height=1280, caption="what does this plan show?")
    refusal = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "megapixels" in (m.text or "")), None), timeout=20
    )
    assert "went wrong" not in refusal.text and refusal.text.count(". ") == 0 and len(refusal.text) < 200
    assert "400" in refusal.text and "50 megapixels" in refusal.text
    await answered(bot, "Answered without the picture.")
    content = blocks_of(model.requests["orchestrator"][0])
    assert content[0]["text"].startswith("what does this plan show?")
    assert "megapixels" in content[0]["text"], "Claude is told a file could not be read"
    assert not [b for b in content if b["type"] == "image"]
    assert not any("went wrong" in (m.text or "") for m in bot.tg.messages(USER_ID))


BAD_PDF = minimal_pdf().replace(b"/Count 1", b"/Count 1 /Broken (unreadable)")


def carries_the_bad_pdf(body: dict[str, Any]) -> tuple[int, int] | None:
    """(message index, block index) of the refused document in a request, if it is there."""
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"] if isinstance(message["content"], list) else []):
            if block.get("type") == "document" and base64.b64decode(block["source"]["data"]) == BAD_PDF:
                return i, j
    return None


@pytest.mark.parametrize("says_where", [True, False], ids=["error-names-the-block", "bare-could-not-process"])
async def test_a_refused_pdf_is_named_dropped_and_the_chat_goes_on(bot: BotHarness, says_where: bool) -> None:
    scripted = RoleScript()
    refused: list[dict[str, Any]] = []

    def api(body: dict[str, Any]) -> Any:
        where = carries_the_bad_pdf(body) if role_of(body) == "orchestrator" else None
        if where is None:
            return scripted(body)
        refused.append(body)
        message = (
            f"messages.{where[0]}.content.{where[1]}.pdf.source.base64.data: The PDF specified was not valid."
            if says_where
            else "Could not process PDF"
        )
        return claude_says.error(400, "invalid_request_error", message, retry_after=None)

    bot.claude.handler = api
    scripted.add(
        "orchestrator",
        claude_says.text("Got fine.pdf."),
        claude_says.text("Without the file: hello."),
        claude_says.text("Second answer."),
    )
    bot.tg.send_document(USER_ID, minimal_pdf(), "fine.pdf", "application/pdf", caption="keep this one")
    await answered(bot, "Got fine.pdf.")
    bot.tg.send_document(USER_ID, BAD_PDF, "broken-report.pdf", "application/pdf", caption="summarise it")

    named = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "broken-report.pdf" in (m.text or "")), None), timeout=20
    )
    assert "refused" in named.text
    await bot.tg.await_for(lambda: any("Without the file: hello." in (m.text or "") for m in bot.tg.messages(USER_ID)))
    assert len(refused) == 1, "refused once, then the turn went on without it"
    retried = scripted.requests["orchestrator"][-1]
    assert carries_the_bad_pdf(retried) is None
    assert any(b.get("text") == "summarise it" for b in blocks_of(retried))

    bot.say("and what next?")
    await answered(bot, "Second answer.")
    assert len(refused) == 1
    latest = scripted.requests["orchestrator"][-1]
    assert carries_the_bad_pdf(latest) is None, "the refused document is no longer re-sent"
    history = [b for m in latest["messages"] for b in m["content"] if isinstance(m["content"], list)]
    assert any(b["type"] == "document" for b in history), "the readable PDF stays in the conversation"
    assert any("broken-report.pdf" in (b.get("text") or "") for b in history), "the model is told it was dropped"
    assert not any("went wrong" in (m.text or "") or "Sorry" in (m.text or "") for m in bot.tg.messages(USER_ID))
