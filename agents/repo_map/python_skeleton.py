"""A Python file's skeleton: its source with function bodies blanked but for their imports, for `ast` to parse.

`ast.parse` builds a Python object for every node of a file, and most nodes are in function bodies, of which an
outline uses only the import statements (python_outline.py). The skeleton keeps every line outside function bodies
as it is, keeps each import statement inside one (moved to the body's indentation: an import under a `try:` of the
body is still an import of the file), and blanks everything else, so line numbers stay; a body left without a
statement gets `pass` on its first line. Strings and comments are found first (one regular expression), so a `def`,
a bracket or an indentation inside them is never taken for code. The scan is a heuristic over text: when the
skeleton does not parse, the caller parses the whole file (python_outline.py does), so a wrong guess costs time,
never a wrong outline of a valid file.
"""

from __future__ import annotations

import re

# Strings (triple-quoted first; any prefix is irrelevant to where a string ends) and comments.
_STRINGS_AND_COMMENTS = re.compile(
    r'"""(?:\\.|[^\\])*?"""' r"|'''(?:\\.|[^\\])*?'''" r'|"(?:\\.|[^"\\\n])*"' r"|'(?:\\.|[^'\\\n])*'" r"|#[^\n]*",
    re.DOTALL,
)
_GOES_ON = "\x01"  # starts a masked line that continues a string begun on an earlier line
_HEADERS = ("def ", "def\t", "async ", "async\t", "class ", "class\t", "class(")  # `async def` told apart below
_IMPORTS = ("import ", "import\t", "from ", "from\t", "from.")
_BLANKS = " \t\f"


def _mask(match: re.Match[str]) -> str:
    text = match.group()
    if text[0] == "#":
        return ""
    lines = text.count("\n")
    return "''" + ("\n" + _GOES_ON) * lines


def _is_function_header(code: str) -> bool:
    if code.startswith(("def ", "def\t")):
        return True
    return code.startswith(("async ", "async\t")) and code[5:].lstrip(_BLANKS).startswith(("def ", "def\t"))


def skeleton(source: str) -> str:
    """The source with function bodies blanked except their imports (line numbers kept); see the module docstring."""
    masked = _STRINGS_AND_COMMENTS.sub(_mask, source).split("\n")
    original = source.split("\n")
    if len(masked) != len(original):  # cannot happen for text the expression understood; be safe
        return source
    out: list[str] = []
    depth = 0  # open brackets
    joined = False  # the previous line ended with a backslash
    keep = True  # the decision for the logical line being read (its continuation lines follow it)
    function_indent = -1  # indentation of the function whose body is being blanked (-1: none)
    body_indent: str | None = None  # the indentation of that body's first statement ('' until it is seen)
    replacement = ""  # what the first physical line of the current logical line becomes, when not kept as is
    for code, line in zip(masked, original):
        continuation = depth > 0 or joined or code.startswith(_GOES_ON)
        if code.startswith(_GOES_ON):
            code = code[1:]
        stripped = code.lstrip(_BLANKS)
        if not continuation and stripped:
            indent = len(code) - len(stripped)
            if function_indent >= 0 and indent <= function_indent:
                function_indent, body_indent = -1, None  # the body ended
            if function_indent < 0:
                keep, replacement = True, ""
                if _is_function_header(stripped):
                    function_indent, body_indent = indent, ""
            else:  # inside a function body
                if not body_indent:
                    body_indent = code[:indent]
                    keep = False
                    replacement = body_indent + (
                        line.lstrip(_BLANKS) if stripped.startswith(_IMPORTS) else "pass"
                    )  # the body's first statement: its import, or `pass`
                elif stripped.startswith(_IMPORTS):
                    keep, replacement = False, body_indent + line.lstrip(_BLANKS)
                else:
                    keep, replacement = False, ""
            out.append(line if keep else replacement)
            if not keep:
                replacement = line if replacement.lstrip(_BLANKS).startswith(_IMPORTS) else ""
        elif continuation:
            out.append(line if keep or replacement else "")
        else:
            out.append("")  # a blank or comment-only line
        opened = code.count("(") + code.count("[") + code.count("{")
        depth = max(depth + opened - code.count(")") - code.count("]") - code.count("}"), 0)
        joined = code.rstrip(_BLANKS).endswith("\\")
    return "\n".join(out)
