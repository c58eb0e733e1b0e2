"""The overhead bench's floor as a process of its own: a bare python-telegram-bot + Anthropic SDK bot (one handler,
one Messages call, one reply; no rate limiter, no store, no rendering), so it is measured as agentlab is, a separate
process with its own interpreter and GIL.

    python bench/_bare_bot_process.py   (TELEGRAM_BOT_TOKEN, TELEGRAM_API_BASE_URL, ANTHROPIC_BASE_URL and
                                         ORCHESTRATOR_MODEL from the environment, as agentlab reads them)

It polls until SIGTERM (python-telegram-bot's run_polling stops on it).
"""

from __future__ import annotations

import os

import anthropic
from telegram import Update
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters


def main() -> None:
    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=os.environ["ANTHROPIC_BASE_URL"], max_retries=0)
    model = os.environ["ORCHESTRATOR_MODEL"]

    async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        response = await client.messages.create(
            model=model, max_tokens=1024, messages=[{"role": "user", "content": update.message.text}]
        )
        answer = "".join(block.text for block in response.content if block.type == "text")
        await update.message.reply_text(answer, do_quote=True)

    base = os.environ["TELEGRAM_API_BASE_URL"].rstrip("/")
    app = (
        ApplicationBuilder()
        .token(os.environ["TELEGRAM_BOT_TOKEN"])
        .base_url(f"{base}/bot")
        .base_file_url(f"{base}/file/bot")
        .build()
    )
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, on_text))
    app.run_polling(poll_interval=0.0, timeout=1, allowed_updates=Update.ALL_TYPES)


if __name__ == "__main__":
    main()
