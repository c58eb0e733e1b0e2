"""The one output filter: token shapes, git's header and helper, URL credentials, key blocks, values verbatim."""

from __future__ import annotations

import asyncio
import html

import pytest

from agents.core.secrets_filter import MASK, OFF_LOOP_CHARS, SecretsFilter, credential_values

SHAPES = SecretsFilter()  # no values added: the token shapes alone
mask = SHAPES.mask


@pytest.mark.parametrize(
    "secret, line",
    [
        ("sk-ant-api03-AbCdEfGhIjKl", "key={}"),
        ("sk-proj-" + "A1b2" * 10, "OPENAI_API_KEY={}"),
        ("ghp_" + "a" * 36, "token {} here"),
        ("github_pat_" + "B" * 30, "{}"),
        ("glpat-" + "x" * 20, "{}"),
        ("xoxb-123456-abcdefghij", "slack {}"),
        ("AKIAABCDEFGHIJKLMNOP", "aws {}"),
        ("npm_" + "c" * 36, "//registry.npmjs.org/:_authToken={}"),
        ("pypi-" + "d" * 60, "password = {}"),
        ("dXNlcjpwYXNz", "\textraHeader = AUTHORIZATION: basic {}"),
        ("eHh4eHh4eHg=", "http.https://github.com/.extraheader=AUTHORIZATION: basic {}"),
        ("hunter2secret", 'helper = "!f() {{ echo password={}; }}; f"'),
        ("abc.def.ghi123", "Authorization: Bearer {}"),
        ("tok3n:pw", "url = https://{}@github.com/o/r.git"),
        ("MIIEvQIBADANBg", "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----"),
    ],
)
def test_known_shapes_are_masked(secret: str, line: str) -> None:
    masked = mask(line.format(secret))
    assert secret not in masked and MASK in masked, masked


def test_ordinary_text_and_code_are_left_alone() -> None:
    text = (
        "def add(a, b):\n    return a + b  # password = get_password()\n"
        "see https://github.com/a/b and mail me@host; tests/test_calc.py::test_add PASSED\n"
        "repository: git+ssh://git@github.com/o/r.git\n"
    )
    assert mask(text) == text


def test_added_values_are_masked_verbatim_and_short_ones_ignored() -> None:
    secrets = SecretsFilter()
    secrets.add(["Zq7-VERBATIM-991", "short"])
    assert secrets.mask("a Zq7-VERBATIM-991 b short") == f"a {MASK} b short"
    assert SHAPES.mask("a Zq7-VERBATIM-991 b") == "a Zq7-VERBATIM-991 b", "one filter's values are not another's"


def test_credential_values_keep_what_looks_secret() -> None:
    text = (
        "NODE_ENV=production\n//registry.example.com/:_authToken=Zq7-NPMRC-1\n# comment=Zz9-NOT-READ\n"
        "export API_KEY='Abc123xyz!'\nmachine h login bob password S3cretPass\n"
    )
    values = credential_values(text)
    assert "production" not in values and "Zz9-NOT-READ" not in values
    assert {"Zq7-NPMRC-1", "Abc123xyz!", "S3cretPass"} <= set(values)


def test_a_config_copy_loses_url_credentials_entirely() -> None:
    assert SHAPES.without_url_credentials("url = https://u:p@h/r.git") == "url = https://h/r.git"


def test_a_key_shape_inside_a_longer_word_is_no_key() -> None:
    """A task branch is `agentlab/task-N-<words>`: its `sk-` plus 32 characters once read as an OpenAI key."""
    branch = "agentlab/task-12-fix-add-so-that-it-returns-the-sum-of-both-numbers"
    assert mask(f"Branch: {branch}") == f"Branch: {branch}"
    assert mask("key=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD") == f"key={MASK}"
    assert mask("x sk-ant-api03-abcdefghijklmnop") == f"x {MASK}"
    assert mask("%22sk-ant-api03-abcdefghijklmnop%22") == f"%22{MASK}%22", "the folded view still finds it"


TELEGRAM_SHAPED = "987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX"


@pytest.mark.parametrize("cut", [3, 10, 11, 30, 44])
@pytest.mark.parametrize("breaking", ["\n", "\r\n"])
def test_a_token_split_over_two_lines_is_masked_on_both(cut: int, breaking: str) -> None:
    text = f"token: {TELEGRAM_SHAPED[:cut]}{breaking}{TELEGRAM_SHAPED[cut:]} end\nnext line"
    assert mask(text) == f"token: {MASK}{breaking}{MASK} end\nnext line"


def test_a_token_or_an_added_value_folded_over_several_lines_is_masked() -> None:
    token = "ghp_" + "aB3" * 12
    folded = "\n".join(token[i : i + 10] for i in range(0, len(token), 10))
    assert mask(f"ok\n{folded}\nordinary words") == "ok\n" + "\n".join([MASK] * 4) + "\nordinary words"
    key = "sk-ant-api03-Own-Key-Of-The-Bot-7781"
    shown = mask("exit code 0 after 0.0s\n" + "\n".join(key[i : i + 12] for i in range(0, len(key), 12)))
    assert shown == "exit code 0 after 0.0s\n" + "\n".join([MASK] * 3), shown
    secrets = SecretsFilter()
    secrets.add(["Zq7-SPLIT-VALUE-5521"])
    assert secrets.mask("Zq7-SPLIT\n-VALUE-5521 done") == f"{MASK}\n{MASK} done"


def test_paths_words_and_hashes_on_consecutive_lines_are_left_alone() -> None:
    text = (
        "tests/test_calc.py::test_add PASSED\nbuild/obj/module_0042.o\nsandbox\nshows the world\n"
        "import asyncio\nimport atexit\n" + "\n".join(["0123456789abcdef0123456789abcdef01234567"] * 3) + "\n"
    )
    assert mask(text) == text


def test_a_scopes_values_are_masked_until_it_closes_and_the_set_does_not_grow() -> None:
    secrets = SecretsFilter()
    secrets.add(["Bot-Own-Scope-Test-4410"])
    before = secrets.value_count()
    for n in range(5):
        task = secrets.scope(f"task {n}")
        other = secrets.scope("another task")
        task.add([f"Task-Value-{n}-xyz99", "Shared-Value-8812"])
        other.add(["Shared-Value-8812"])
        assert secrets.mask(f"Task-Value-{n}-xyz99 Shared-Value-8812") == f"{MASK} {MASK}"
        task.close()
        shown = secrets.mask(f"Task-Value-{n}-xyz99")
        assert shown == f"Task-Value-{n}-xyz99", "a closed scope's value is still masked"
        assert secrets.mask("Shared-Value-8812") == MASK, "a value another open scope holds was forgotten"
        other.close()
        assert secrets.value_count() == before
    assert secrets.mask("Bot-Own-Scope-Test-4410") == MASK


async def test_a_big_text_is_masked_off_the_event_loop_a_small_one_at_once() -> None:
    """`mask_soon`: the same masking either way; past OFF_LOOP_CHARS the event loop runs other work meanwhile (a
    document of megabytes would otherwise stall every chat for a third of a second per megabyte)."""
    secrets = SecretsFilter()
    secrets.add(["sup3r-secret-value"])
    turns = 0
    stop = asyncio.Event()

    async def other_work() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    async def turns_while_masking(text: str) -> tuple[str, int]:
        nonlocal turns
        await asyncio.sleep(0)  # other_work has started and is waiting for its next turn
        turns = 0
        masked = await secrets.mask_soon(text)
        return masked, turns

    worker = asyncio.create_task(other_work())
    try:
        small = "token sup3r-secret-value here"
        big = small + "\n" + "x = 1\n" * (OFF_LOOP_CHARS // 6 + 1)
        masked_small, turns_small = await turns_while_masking(small)
        masked_big, turns_big = await turns_while_masking(big)
    finally:
        stop.set()
        await worker
    assert masked_small == secrets.mask(small) and "sup3r" not in masked_small and MASK in masked_small
    assert masked_big == secrets.mask(big) and "sup3r" not in masked_big
    assert turns_small == 0, "a small text is masked at once, without giving the loop away"
    assert turns_big > 0, "the loop went on while a big text was masked"


async def test_bytes_that_are_not_utf8_are_kept_and_never_switch_the_masking_off() -> None:
    """A file's bytes (a diff, a log) with a byte that is not UTF-8 (a Latin-1 file, a stray binary): masked all the
    same, and every byte that is not a secret comes back as it was."""
    secrets = SecretsFilter()
    secrets.add(["sup3r-secret-value"])
    data = b"caf\xe9 = 1\ntoken = 'sup3r-secret-value'\n\xff\xfe end\n"
    for masked in (secrets.mask_bytes(data), await secrets.mask_bytes_soon(data * (OFF_LOOP_CHARS // len(data) + 1))):
        assert b"sup3r" not in masked and MASK.encode() in masked
        assert masked.startswith(b"caf\xe9 = 1\ntoken = '" + MASK.encode() + b"'\n\xff\xfe end\n")
    assert secrets.mask_bytes(b"caf\xe9 \xff") == b"caf\xe9 \xff"


FOLDED_KEY = "sk-ant-api03-Own-Key-Of-The-Bot-7781-abcdefghijkl"
FOLDED_TOKEN = "987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX"


@pytest.mark.parametrize(
    "written",
    [
        FOLDED_KEY.replace("-", "&#45;"),
        FOLDED_KEY.replace("-", "&#x2d;"),
        FOLDED_TOKEN.replace(":", "&#58;"),
        FOLDED_TOKEN.replace(":", "&colon;"),
    ],
    ids=["decimal", "hex", "token-decimal", "named"],
)
def test_a_secret_in_html_character_references_is_masked(written: str) -> None:
    """A GitHub comment or a web page shows `&#45;` as `-`: the folded view reads it so too."""
    secrets = SecretsFilter()
    secrets.add([FOLDED_KEY, FOLDED_TOKEN])
    out = secrets.mask(f"see {written} here")
    assert FOLDED_KEY not in html.unescape(out) and FOLDED_TOKEN not in html.unescape(out), out
    assert out.startswith("see ") and out.endswith(" here")


@pytest.mark.parametrize(
    "invisible",
    ["\u200e", "\u200f", "\u2062", "\u2066", "\u202a", "\u034f", "\ufe0f", "\U000e0020", "\u3164"],
    ids=["LRM", "RLM", "invisible-times", "LRI", "LRE", "CGJ", "VS16", "tag-space", "hangul-filler"],
)
def test_a_key_spelled_with_invisible_characters_between_its_letters_is_masked(invisible: str) -> None:
    secrets = SecretsFilter()
    secrets.add([FOLDED_KEY])
    out = secrets.mask("key: " + invisible.join(FOLDED_KEY) + " end")
    assert "".join(c for c in out if c != invisible) == f"key: {MASK} end", repr(out[:80])


def test_a_plain_text_document_is_masked_and_encoded_data_left_alone() -> None:
    """A text file the model is shown is a document block whose source is text: masked like any text; a PDF's or an
    image's base64 data is not text to mask."""
    token = "ghp_" + "a" * 36
    text_doc = {"type": "document", "title": "a.env", "source": {"type": "text", "media_type": "text/plain"}}
    text_doc["source"]["data"] = f"TOKEN={token}\n"
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": token}}
    masked_text, masked_pdf = SHAPES.mask_json([text_doc, pdf])
    assert token not in masked_text["source"]["data"] and MASK in masked_text["source"]["data"], masked_text
    assert masked_pdf == pdf


def test_api_messages_are_masked_in_place_and_a_value_added_later_is_masked_in_a_text_seen_before() -> None:
    secrets = SecretsFilter()
    token = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": f"T={token}"}}
    picture = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    text = {"type": "text", "text": "deploy with hunter2-longer-value please"}
    messages = [{"role": "user", "content": [picture, document, text]}, {"role": "assistant", "content": token}]
    secrets.mask_messages(messages)
    assert messages[0]["content"][0] is picture and messages[0]["content"][1] is document, "the same block objects"
    assert token not in document["source"]["data"] and messages[1]["content"] == "«masked»"
    assert text["text"] == "deploy with hunter2-longer-value please", "nothing known to mask in it yet"
    secrets.add(["hunter2-longer-value"])
    again = {"type": "text", "text": "deploy with hunter2-longer-value please"}
    secrets.mask_messages([{"role": "user", "content": [again]}])
    assert again["text"] == "deploy with «masked» please", "a text remembered masked before the value came"
