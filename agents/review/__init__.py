"""The review page: a Telegram Mini App the bot serves for a finished task (verdict, tests, diff, screenshots, the
summary's actions), with its launch data checked against the bot's token."""
