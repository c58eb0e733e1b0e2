"""`python -m telegram_bot` starts the bot (same as `agentlab run`)."""

import sys

from telegram_bot.cli import main

sys.exit(main(sys.argv[1:] or ["run"]))
