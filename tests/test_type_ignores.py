"""Every `# type: ignore` in the source says which error it silences and why, on its own line.

mypy (run by `make test`) checks that an ignore names its error code; this test also covers the folders mypy does not
check (tests/, bench/) and asks for the reason: `# type: ignore[arg-type]  # <why>`. The comments are read with
`tokenize`, so the words inside a string never count.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("agents", "telegram_bot", "tests", "bench")

IGNORE = re.compile(r"#\s*type:\s*ignore\b")
# the code(s) in brackets, then a second comment with at least a few words of reason
WELL_FORMED = re.compile(r"#\s*type:\s*ignore\[[a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*\]\s+#\s*\S.{4,}")


def ignores_without_reason(source: str) -> list[tuple[int, str]]:
    """(line, comment) of each `type: ignore` comment in `source` that lacks a code or a reason."""
    if not IGNORE.search(source):  # most files: no such text at all, so no such comment (tokenizing costs far more)
        return []
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and IGNORE.search(token.string) and not WELL_FORMED.search(token.string):
            found.append((token.start[0], token.string))
    return found


def test_the_pattern_tells_good_from_bad() -> None:
    good = "x = f()  # type: ignore[arg-type]  # the stubs say str, the library takes bytes too\n"
    assert ignores_without_reason(good) == []
    for bad in (
        "x = f()  # type: ignore\n",
        "x = f()  # type: ignore[arg-type]\n",
        "x = f()  # type: ignore  # no code given\n",
        "x = f()  # type: ignore[arg-type]  (not a pytest test)\n",
        "x = f()  #type:ignore[misc]#\n",
    ):
        assert [line for line, _ in ignores_without_reason(bad)] == [1], bad
    assert ignores_without_reason('text = "# type: ignore"\n') == []


def test_every_type_ignore_has_a_code_and_a_reason() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {comment}"
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, comment in ignores_without_reason(path.read_text())
    ]
    assert not offenders, "a `# type: ignore` without `[code]  # reason`:\n" + "\n".join(offenders)
