"""The task eval's small repositories, each with a real bug its own tests catch, the request a user would send, and
the fix (what the scripted model plays, so the eval itself is tested without a key)."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class TaskFixture:
    """A repository with a bug, the request to fix it, and one correct fix (path, old text, new text)."""

    name: str
    language: str
    worker: str  # code / frontend / test
    request: str
    files: dict[str, str]
    fix: tuple[str, str, str]


_NODE_TEST = "const { test } = require('node:test');\nconst assert = require('node:assert');\n"

FIXTURES: tuple[TaskFixture, ...] = (
    TaskFixture(
        name="py-divide",
        language="Python",
        worker="code",
        request="divide() in stats.py crashes on an empty list; it should return 0.0 for an empty list. Fix it.",
        files={
            "stats.py": "def mean(values):\n    return sum(values) / len(values)\n\n\ndef divide(values):\n"
            "    return mean(values)\n",
            "test_stats.py": "from stats import divide, mean\n\n\n"
            "def test_mean():\n    assert mean([1, 2, 3]) == 2\n\n\n"
            "def test_divide_empty():\n    assert divide([]) == 0.0\n",
        },
        fix=(
            "stats.py",
            "def divide(values):\n    return mean(values)",
            "def divide(values):\n    return mean(values) if values else 0.0",
        ),
    ),
    TaskFixture(
        name="py-slug",
        language="Python",
        worker="code",
        request="slugify('Hello World') in text_tools.py gives 'Hello-World'; slugs must be lower case. Fix the bug.",
        files={
            "text_tools.py": "def slugify(title):\n    return '-'.join(title.split())\n",
            "tests/test_text_tools.py": "from text_tools import slugify\n\n\ndef test_slug():\n"
            "    assert slugify('Hello World') == 'hello-world'\n",
        },
        fix=("text_tools.py", "'-'.join(title.split())", "'-'.join(title.lower().split())"),
    ),
    TaskFixture(
        name="js-total",
        language="JavaScript",
        worker="code",
        request="total() in cart.js leaves out the last item of the cart. Fix it.",
        files={
            "package.json": json.dumps({"name": "cart", "private": True, "scripts": {"test": "node --test"}}),
            "cart.js": "exports.total = (items) => {\n  let sum = 0;\n  for (let i = 0; i < items.length - 1; i++) "
            "sum += items[i].price;\n  return sum;\n};\n",
            "test/cart.test.js": _NODE_TEST + "const { total } = require('../cart');\n\ntest('sums every item', () => "
            "assert.strictEqual(total([{ price: 2 }, { price: 3 }]), 5));\n",
        },
        fix=("cart.js", "i < items.length - 1", "i < items.length"),
    ),
    TaskFixture(
        name="js-pad",
        language="JavaScript",
        worker="code",
        request="formatTime(5, 7) in clock.js should give '05:07' but gives '5:7'. Fix it.",
        files={
            "package.json": json.dumps({"name": "clock", "private": True, "scripts": {"test": "node --test"}}),
            "clock.js": "exports.formatTime = (h, m) => `${h}:${m}`;\n",
            "test/clock.test.js": _NODE_TEST + "const { formatTime } = require('../clock');\n\ntest('pads', () => "
            "assert.strictEqual(formatTime(5, 7), '05:07'));\n",
        },
        fix=(
            "clock.js",
            "`${h}:${m}`",
            "`${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}`",
        ),
    ),
    TaskFixture(
        name="web-counter",
        language="JavaScript (frontend)",
        worker="frontend",
        request="The + button on the counter page does nothing the second time: each click should add one. Fix it.",
        files={
            "package.json": json.dumps({"name": "counter", "private": True, "scripts": {"test": "node --test"}}),
            "index.html": "<!doctype html>\n<button id=plus>+</button> <span id=count>0</span>\n"
            "<script src=counter.js></script>\n<script>\nconst c = new Counter();\n"
            "document.getElementById('plus').onclick = () => {\n"
            "  document.getElementById('count').textContent = c.increment();\n};\n</script>\n",
            "counter.js": "class Counter {\n  constructor() { this.value = 0; }\n"
            "  increment() { return this.value + 1; }\n}\n"
            "if (typeof module !== 'undefined') module.exports = { Counter };\n",
            "test/counter.test.js": _NODE_TEST
            + "const { Counter } = require('../counter');\n\ntest('counts every click', () => {\n"
            "  const c = new Counter();\n  c.increment();\n  assert.strictEqual(c.increment(), 2);\n});\n",
        },
        fix=("counter.js", "return this.value + 1;", "return ++this.value;"),
    ),
)
