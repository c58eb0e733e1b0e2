"""The one output filter (issue 22): every text a model or the chat sees from tools and commands passes `mask`.

Known token shapes become `«masked»`: the regexes of the maintained `detect-secrets` plugins (AWS, GitHub, GitLab,
Slack, npm, PyPI, OpenAI, Stripe, SendGrid, Discord, Azure, JWT, Telegram, Twilio, URL passwords), plus shapes it
lacks (Anthropic and current OpenAI/GitHub/npm keys, `Authorization:`/`Bearer` values, git's `http.extraHeader`, an
inline `credential.helper`, URL credentials without a password, whole private-key blocks). Values are also masked
verbatim: the bot's own secrets (registered at start-up) and the values found in a workspace's credential files
(`.npmrc`, `.env.production`, ...: `remember`), so `cat .npmrc` shows neither.

What it cannot do: a command that re-encodes a secret (base64, reversed, split) prints something no filter knows.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable

MASK = "«masked»"
_MIN_VERBATIM = 8  # shorter values ("true", "1234") would mask ordinary text
# detect-secrets plugins whose regexes are token shapes (not keyword or entropy heuristics, which fire on code)
_PLUGINS = (
    "aws.AWSKeyDetector",
    "github_token.GitHubTokenDetector",
    "gitlab_token.GitLabTokenDetector",
    "slack.SlackDetector",
    "npm.NpmDetector",
    "pypi_token.PypiTokenDetector",
    "openai.OpenAIDetector",
    "stripe.StripeDetector",
    "sendgrid.SendGridDetector",
    "discord.DiscordBotTokenDetector",
    "azure_storage_key.AzureStorageKeyDetector",
    "jwt.JwtTokenDetector",
    "telegram_token.TelegramBotTokenDetector",
    "twilio.TwilioKeyDetector",
    "basic_auth.BasicAuthDetector",
)
# Where a plugin's regex has a group that is the secret itself (the rest of the match is context), mask only it.
_SECRET_GROUP = {"basic_auth.BasicAuthDetector", "aws.AWSKeyDetector", "npm.NpmDetector"}
# Shapes detect-secrets does not know: (regex, a lower-case word the text must contain for it to be tried: a
# case-insensitive regex is ~50 times slower than one starting with a literal). A group named `secret` is masked,
# otherwise the whole match.
_OWN_SHAPES = (
    (r"sk-ant-[A-Za-z0-9_-]{8,}", None),  # Anthropic
    (r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}", None),  # OpenAI (current shapes)
    (r"github_pat_[A-Za-z0-9_]{22,}", None),  # GitHub fine-grained
    (r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", None),
    (r"pypi-[A-Za-z0-9_-]{40,}", None),
    (r"glpat-[A-Za-z0-9_-]{20,}", None),
    (r"xox[abposr]-[A-Za-z0-9-]{10,}", None),
    (r"(?i)\b(?:proxy-)?authorization\s*[:=]\s*(?P<secret>[^\r\n\"']+)", "authorization"),
    (r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})", "bearer"),
    (r"(?im)\bextraheader\s*[=:]\s*(?P<secret>[^\r\n]+)", "extraheader"),  # git's http.extraHeader
    (r"(?im)\bhelper\s*=\s*(?P<secret>[\"']?!.*)$", "helper"),  # inline credential.helper: a shell snippet
    (r"(?i)aws_secret_access_key\s*[=:]\s*(?P<secret>\S+)", "aws_secret_access_key"),
    (
        r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        None,
    ),
    (r"PuTTY-User-Key-File-\d:[^\n]*(?:\n[^\n]*){0,40}?Private-MAC: \S+", None),
)


@functools.cache
def _shapes() -> tuple[tuple[re.Pattern[str], bool, str | None], ...]:
    """(regex, mask the `secret` group only, needle) for every shape: detect-secrets' plugins, then our own."""
    import importlib

    found: list[tuple[re.Pattern[str], bool, str | None]] = []
    for dotted in _PLUGINS:
        module, _, name = dotted.rpartition(".")
        try:
            plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)()
        except (ImportError, AttributeError):  # detect-secrets absent or changed: our own shapes still apply
            continue
        for regex in plugin.denylist:
            grouped = dotted in _SECRET_GROUP and regex.groups >= 1
            found.append((_named_first_group(regex) if grouped else regex, grouped, None))
    found += [(re.compile(pattern), "(?P<secret>" in pattern, needle) for pattern, needle in _OWN_SHAPES]
    return tuple(found)


def load_shapes() -> int:
    """Import detect-secrets and compile every shape now (blocking, about half a second on a slow machine), so the
    first text masked (the first frame of the first answer) does not pay for it; how many shapes there are."""
    return len(_shapes())


def _named_first_group(regex: re.Pattern[str]) -> re.Pattern[str]:
    """The same regex with its first capturing group named `secret` (detect-secrets' groups are unnamed)."""
    pattern = re.sub(r"(?<!\\)\((?!\?)", "(?P<secret>", regex.pattern, count=1)
    return re.compile(pattern, regex.flags)


def _mask_group(match: re.Match[str]) -> str:
    start, end = match.span("secret")
    if start < 0:
        return MASK
    offset = match.start()
    text = match.group(0)
    return text[: start - offset] + MASK + text[end - offset :]


class _Verbatim:
    """Secret values masked wherever they appear: the bot's own and those found in credential files."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._regex: re.Pattern[str] | None = None

    def add(self, values: Iterable[str]) -> None:
        new = {v.strip() for v in values if v and len(v.strip()) >= _MIN_VERBATIM}
        with self._lock:
            if new <= self._values:
                return
            self._values = self._values | new
            ordered = sorted(self._values, key=len, reverse=True)  # longest first: a value containing another
            self._regex = re.compile("|".join(re.escape(v) for v in ordered))

    def sub(self, text: str) -> str:
        regex = self._regex
        return regex.sub(MASK, text) if regex is not None else text


_verbatim = _Verbatim()


def remember(values: Iterable[str]) -> None:
    """Mask these values verbatim from now on, in every task's output (the bot's secrets, credential files' values);
    values shorter than 8 characters are ignored."""
    _verbatim.add(values)


def mask(text: str) -> str:
    """`text` with every known secret replaced by `«masked»`."""
    if not text:
        return text
    text = _verbatim.sub(text)
    text = _URL_CREDENTIALS.sub(_mask_url_credentials, text)
    lowered = text.lower()
    for regex, grouped, needle in _shapes():
        if needle is not None and needle not in lowered:
            continue
        if grouped:
            text = regex.sub(_mask_group, text)
        else:
            text = regex.sub(MASK, text)
    return text


_URL_CREDENTIALS = re.compile(r"://(?P<secret>[^\s/@'\"<>]+)@")


def _mask_url_credentials(match: re.Match[str]) -> str:
    """`user:password@` always; a bare `token@` only when it looks like a token (not `ssh://git@github.com`)."""
    userinfo = match.group("secret")
    if ":" in userinfo or (len(userinfo) >= 12 and _looks_secret(userinfo)):
        return f"://{MASK}@"
    return match.group(0)


_URL_USERINFO = re.compile(r"://[^\s/@'\"<>]+@")


def without_url_credentials(text: str) -> str:
    """`https://user:token@host` → `https://host`, then `mask`: for a config a program still reads (the sandbox's
    copy of `.git/config`: `git remote -v` works and shows a plain URL)."""
    return mask(_URL_USERINFO.sub("://", text))


def mask_json(value: object) -> object:
    """`mask` applied to every string inside a JSON-like value (tool results made of content blocks); image and
    document blocks (base64 data) are left as they are."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, list):
        return [mask_json(v) for v in value]
    if isinstance(value, dict):
        if value.get("type") in ("image", "document"):
            return value
        return {k: mask_json(v) for k, v in value.items()}
    return value


_ASSIGNMENT = re.compile(r"""^\s*(?:export\s+)?[^\s=:#]+\s*[=:]\s*(?P<value>.+?)\s*$""")
_NETRC = re.compile(r"\b(?:password|passwd|login|account)\s+(?P<value>\S+)")


def credential_values(text: str) -> list[str]:
    """The values a credential file (`.env*`, `.npmrc`, `.netrc`, `.pypirc`, `.git-credentials`, ...) assigns:
    those that look like secrets (8+ characters mixing at least two of lower case, upper case, digits, symbols),
    so that `NODE_ENV=production` does not mask the word `production` everywhere."""
    found: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith(("#", ";", "[")):
            continue
        candidates = [m.group("value") for m in _NETRC.finditer(line)]
        if (m := _ASSIGNMENT.match(line)) is not None:
            value = m.group("value").strip().strip("'\"")
            candidates += [value, value.rpartition("=")[2]]
        candidates += [u.group("secret") for u in re.finditer(r"://(?P<secret>[^\s/@]+)@", line)]
        found += [c for c in candidates if _looks_secret(c)]
    return list(dict.fromkeys(found))


def _looks_secret(value: str) -> bool:
    if len(value) < _MIN_VERBATIM or " " in value:
        return False
    classes = (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
        any(not c.isalnum() for c in value),
    )
    return sum(classes) >= 2
