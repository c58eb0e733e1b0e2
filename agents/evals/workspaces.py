"""The small throw-away workspaces the routing eval's orchestrator sees (calc, group-therapy, portfolio, `self`),
and the proposals a case can have pending in them."""

from __future__ import annotations

from pathlib import Path

from agents.workspaces.folders import Workspaces

SELF_FOLDER = "agentlab-self"

EVAL_WORKSPACES: dict[str, dict[str, str]] = {
    "calc": {
        "README.md": "# calc\nA tiny calculator library.\n",
        "calc.py": "def add(a, b):\n    return a - b\n\n\ndef divide(a, b):\n    return a / b\n",
        "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    },
    "group-therapy": {
        "README.md": "# Group therapy\nBooking and reminders for group therapy sessions (Flask).\n",
        "app.py": (
            "from flask import Flask, render_template\n\nfrom scheduler import upcoming_sessions\n\n"
            "app = Flask(__name__)\n\n\n@app.route('/')\ndef index():\n"
            "    return render_template('index.html', sessions=upcoming_sessions())\n"
        ),
        "scheduler.py": (
            "from datetime import datetime, timedelta\n\nSESSIONS = []\n\n\n"
            "def schedule_session(group, when: datetime):\n    SESSIONS.append((group, when))\n\n\n"
            "def upcoming_sessions(now=None):\n    now = now or datetime.now()\n"
            "    return [s for s in SESSIONS if s[1] >= now and s[1] - now < timedelta(days=7)]\n"
        ),
        "reminders.py": "def send_reminder(email, session):\n    raise NotImplementedError\n",
        "templates/index.html": (
            "<!doctype html>\n<h1>Upcoming sessions</h1>\n"
            "<ul>{% for s in sessions %}<li>{{ s }}</li>{% endfor %}</ul>\n"
        ),
        "static/style.css": "body { font-family: sans-serif; background: #fff; }\n",
    },
    "portfolio": {
        "README.md": "# portfolio\nMy personal site (plain HTML/CSS).\n",
        "index.html": (
            '<!doctype html>\n<html><head><link rel="stylesheet" href="style.css"></head>\n'
            '<body><header>Jane Dev</header><main><section id="projects"></section>'
            '<form id="contact"></form></main></body></html>\n'
        ),
        "style.css": "header { padding: 1rem; }\n#contact { width: 600px; }\n",
    },
    SELF_FOLDER: {
        "README.md": "# agentlab\nA Telegram bot that drives Claude agents.\n",
        "telegram_bot/handlers.py": "# /start /help /status and text messages\n",
        "telegram_bot/commands.py": "# /tasks /task /cancel /usage /log /new /history\n",
        "telegram_bot/render.py": "# Markdown to Telegram HTML\n",
        "agents/chat/orchestrator.py": "# one chat turn\n",
    },
}


CANNED_PROPOSALS: dict[str, tuple[str, str]] = {  # workspace → (the request, the proposal body)
    "group-therapy": (
        "make the session scheduling better",
        "## Summary\nStore sessions in SQLite instead of a list and add e-mail reminders.\n"
        "## Plan\n1. Add a sessions table and move scheduler.py onto it.\n2. Implement reminders.send_reminder "
        "with smtplib.\n3. Add a /sessions JSON endpoint.\n## Effort\nmedium",
    ),
    "calc": (
        "review calc and suggest improvements",
        "## Summary\nFix add(), guard divide() against zero, add type hints.\n"
        "## Plan\n1. Fix add to return a + b.\n2. Raise ValueError on division by zero.\n3. Add type hints.\n"
        "## Effort\nsmall",
    ),
    "portfolio": (
        "redesign the portfolio",
        "## Summary\nA responsive one-page layout with a projects grid and a dark theme.\n"
        "## Plan\n1. Rewrite style.css mobile-first.\n2. Add a projects grid.\n3. Make the contact form fluid.\n"
        "## Effort\nmedium",
    ),
    "self": (
        "clean up your command handlers",
        "## Summary\nSplit telegram_bot/commands.py into account and task commands.\n"
        "## Plan\n1. Move /usage and /log to account.py.\n2. Keep task commands in commands.py.\n## Effort\nsmall",
    ),
}


def make_eval_workspaces(folder: Path) -> Workspaces:
    """Write the eval's project folders under `folder`; returns them as Workspaces (`self` = the agentlab-self copy)."""
    root = folder / "workspaces"
    for name, files in EVAL_WORKSPACES.items():
        base = folder / name if name == SELF_FOLDER else root / name
        for relative, content in files.items():
            target = base / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
    return Workspaces(root, folder / SELF_FOLDER)
