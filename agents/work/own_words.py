"""The user's own words of a chat turn, read for the decisions that are theirs alone.

A merge or a discard, a proposal approved, rejected or reworked (a new research that replaces it), a pull request
opened (the owner's code published), a schedule made, paused, resumed or cancelled, a standing note kept (it reaches
every later worker) or forgotten, a workspace created, a running task cancelled: when the orchestrator calls one of
these in a chat turn, it happens only if the words the user wrote or spoke in that turn ask for it, or agree to it (a
"yes" to "shall I merge #7?"). A worker's report, a proposal, a file, a page or a forwarded message may tell the model
to call any tool, and a model would; the turn's own words are the user's. Otherwise the call is refused and the chat
is told what the assistant wanted, with the buttons that decide it where there are some. A button, the review page, a
schedule's run and the bot itself act outside a turn and are never asked.

The reading is generous on purpose (a miss costs the user a tap or a sentence) but not blind: words that refuse the
decision ("thanks, but don't merge it yet", "no need to open a PR") never pass, and a bare "ok" agrees only when
nothing in the message says no or wait. A rework alone takes words that ask for a change ("use sqlite", "skip the
middleware part"): said to a proposal, a bare "yes" or "go ahead" approves it.

Words say which item too, not only which kind of decision. A reply to the bot's message showing a proposal or a task
decides that one: a decision the model calls on another proposal or task is not decided by it, unless the words name
that one's number ("#2", "approve 2"). A bare agreement that is not such a reply is ambiguous, and decides nothing,
while a worker's question waits in the conversation (the "go ahead" may answer it), or while several proposals are
pending and it names none. A refusal for these reasons is the same notice with the item's buttons.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agents.core.actions import Buttons
from agents.core.errors import ToolError
from agents.core.models import Caller
from agents.core.protocols import Notifier
from agents.store.connection import Connection
from agents.store.shown import PROPOSAL, TASK
from agents.store.standing import AskedQuestions
from agents.work.turn_scope import TurnScope, current_turn


def _words(alternatives: str) -> re.Pattern[str]:
    """Any of the `|`-separated alternatives (each a regular expression) as whole words, case aside."""
    return re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE)


@dataclass(frozen=True)
class Decision:
    """One of the user's decisions: the verb the chat reads ("merge"), the words that ask for it (a word before them
    can refuse it), and the button that decides it where there is one (else `example`: words that would ask for it,
    for the chat's notice)."""

    verb: str
    asks: re.Pattern[str]
    button: str = ""
    example: str = ""
    # words that say what the decision would do rather than name it ("use sqlite", "don't add a table" ask for a
    # rework): they ask for it wherever they stand, a "don't" before them being part of what they ask
    describes: re.Pattern[str] | None = None
    # whether a bare agreement ("yes", "go ahead") decides it; not a rework: said to a proposal, those approve it
    agreeing_decides: bool = True


MERGE = Decision("merge", _words(r"merg\w*|land\w*|ship\w*|integrat\w*|accept\w*|apply|pull it in"), "Merge")
DISCARD = Decision(
    "discard",
    _words(
        r"discard\w*|throw\w*|trash\w*|drop\w*|delet\w*|remov\w*|scrap\w*|bin|get rid|abandon\w*|reject\w*|"
        r"toss\w*|dump\w*|nuke\w*|kill\w*|eras\w*|wipe\w*|forget it|undo"
    ),
    "Discard",
)
APPROVE = Decision(
    "approve",
    _words(
        r"approv\w*|implement\w*|build\w*|proceed\w*|start\w*|let'?s (?:do it|go)|lgtm|looks good|"
        r"sounds good|ship\w*|make it so|accept\w*"
    ),
    "Approve",
)
REJECT = Decision(
    "reject",
    _words(
        r"reject\w*|declin\w*|drop\w*|scrap\w*|discard\w*|bin it|forget (?:it|about it)|never ?mind|"
        r"no thanks|not interested|cancel\w*|abandon\w*|pass on it"
    ),
    "Reject",
)
# A rework: a new research whose proposal replaces the one the user is deciding; the words ask for a change to it
REWORK = Decision(
    "rework",
    _words(
        r"chang\w*|refin\w*|rework\w*|re-?do\w*|revis\w*|re-?think\w*|adjust\w*|tweak\w*|modif\w*|amend\w*|"
        r"alter\w*|edit\w*|re-?writ\w*|updat\w*|improv\w*|differen\w*|alternativ\w*|another (?:way|approach|plan|take)"
    ),
    example="rework it: use sqlite instead",
    agreeing_decides=False,
    describes=_words(
        r"us(?:e|es|ing)|add\w*|skip\w*|without|leave (?:\w+ )?out|exclud\w*|includ\w*|instead|rather|switch\w*|"
        r"replac\w*|prefer\w*|what about|how about|what if|try|simpl\w*|smaller|bigger|larger|narrow\w*|focus\w*|"
        r"split\w*"
    ),
)
PULL_REQUEST = Decision(
    "open a pull request for",
    _words(r"prs?|pull[- ]requests?|push\w*|publish\w*|github|upstream|submit\w*|send it|open\w*|raise\w*"),
    "Open PR",
)
SCHEDULE = Decision(
    "make",
    _words(
        r"every|each|daily|nightly|hourly|weekly|monthly|weekdays?|weekends?|morning|afternoon|evening|"
        r"nights?|tonight|tomorrow|noon|midnight|at \d+|\d+ ?(?:am|pm)|o'?clock|later|"
        r"in (?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|thirty|a few|a couple of|"
        r"half an?) ?(?:sec\w*|min\w*|hours?|hrs?|days?|weeks?|months?|[hms])|schedul\w*|remind\w*|recurr\w*|"
        r"repeat\w*|cron|periodic\w*|regular\w*|routine|(?:mon|tues|wednes|thurs|fri|satur|sun)days?|once"
    ),
    example="every weekday at 9 run the tests in calc",
)
PAUSE = Decision(
    "pause",
    _words(
        r"paus\w*|stop\w*|hold|suspend\w*|disabl\w*|skip\w*|turn (?:it )?off|switch (?:it )?off|halt\w*|"
        r"freeze|snooz\w*"
    ),
    example="pause the nightly schedule",
)
RESUME = Decision(
    "resume",
    _words(
        r"resum\w*|unpaus\w*|restart\w*|continu\w*|re-?enabl\w*|reactivat\w*|start\w*|"
        r"turn (?:it )?(?:back )?on|switch (?:it )?(?:back )?on|back on|again"
    ),
    example="resume the nightly schedule",
)
CANCEL_SCHEDULE = Decision(
    "cancel",
    _words(
        r"cancel\w*|delet\w*|remov\w*|stop\w*|drop\w*|kill|end|disabl\w*|turn (?:it )?off|get rid|scrap\w*|"
        r"abandon\w*|forget\w*|nuke|no more|unschedul\w*"
    ),
    "Cancel",
)
REMEMBER = Decision(
    "keep",
    _words(
        r"rememb\w*|note\w*|from now on|always|never|keep in mind|in (?:the )?future|going forward|"
        r"make sure|by default|every time|whenever|don'?t forget"
    ),
    example="remember that in site we use pnpm",
)
FORGET = Decision(
    "forget",
    _words(
        r"forget\w*|forgot\w*|delet\w*|remov\w*|drop\w*|clear\w*|scrap\w*|discard\w*|eras\w*|wipe\w*|"
        r"get rid|no longer|undo|retract\w*|cancel\w*"
    ),
    "Forget",
)
CREATE_WORKSPACE = Decision(
    "create",
    _words(
        r"creat\w*|new|make|build\w*|start\w*|set ?up|scaffold\w*|bootstrap\w*|init\w*|spin up|workspaces?|"
        r"projects?|repo\w*"
    ),
    example="create a workspace named portfolio",
)
CANCEL_TASK = Decision(
    "cancel",
    _words(
        r"stop\w*|cancel\w*|kill\w*|abort\w*|halt\w*|end it|enough|quit|terminat\w*|interrupt\w*|scrap\w*|"
        r"drop\w*|never ?mind|forget (?:it|about it)"
    ),
    "Cancel",
)

# Agreeing to what the assistant proposed in its last answer ("Shall I merge #7?" "yes")
_AGREES = _words(
    r"yes|yep|yeah|yup|sure|ok|okay|do it|go ahead|go for it|please do|confirm\w*|fine|sounds good|"
    r"looks good|lgtm"
)
# Words that refuse what follows them in the same clause ("don't merge", "no need to open a PR", "hold off on
# cancelling"); a clause ends at punctuation or a "but"
_REFUSES = re.compile(
    r"\b(?:don'?t|do not|does not|not|never|no|nope|nah|wait|hold (?:on|off)|stop|without|neither|nor|cannot|"
    r"(?:do|does|did|ca|wo|should|would|could|must|is|are|was|were|have|has|had|need)n'?t)\b",
    re.IGNORECASE,
)
_CLAUSES = re.compile(r"[.,;:!?()\n—–]+|\s-\s|\b(?:but|though|although|however|except|instead)\b", re.IGNORECASE)


ASKS, AGREES = "asks", "agrees"  # how words pass: they ask for the decision, or only agree to it
_NOT_ASKED = "your message did not ask for it"


def _reading(said: str, decision: Decision) -> str | None:
    """ASKS: a word that asks for the decision, in a clause where no word before it refuses it, or a word that
    describes it (`Decision.describes`); AGREES: none of those, but, where agreeing decides it, a word that agrees,
    in a message where nothing says no; None: neither. Any clause refusing it ("…, but don't merge it yet") decides
    against, whatever else the message says."""
    text = said.replace("’", "'").replace("‘", "'")
    asked = False
    for clause in _CLAUSES.split(text):
        for match in decision.asks.finditer(clause):
            if _REFUSES.search(clause[: match.start()]):
                return None
            asked = True
    if asked or (decision.describes is not None and decision.describes.search(text)):
        return ASKS
    agrees = decision.agreeing_decides and _AGREES.search(text) is not None
    return AGREES if agrees and _REFUSES.search(text) is None else None


def words_ask_for(said: str, decision: Decision) -> bool:
    """Whether the user's words ask for the decision, or agree to it (`_reading`)."""
    return _reading(said, decision) is not None


# The item a decision is on, as the crew's parts name it in the subject of the call ("**proposal #3**", "**task #7**")
_ITEM = re.compile(rf"\*\*({PROPOSAL}|{TASK}) #(\d+)\*\*")


def item_of(subject: str) -> tuple[str, int] | None:
    """The proposal or task a decision's subject names, as (PROPOSAL, 3); None for anything else (a schedule, a
    note, a new workspace: no reply can point at those)."""
    found = _ITEM.fullmatch(subject)
    return (found.group(1), int(found.group(2))) if found else None


def names_item(said: str, item: tuple[str, int], decision: Decision) -> bool:
    """Whether the words name the item by its number: "#2", "proposal 2", "number 2", or after a word asking for the
    decision ("approve 2"); not a number that says something else ("2 small tweaks", "v2", "12", "2.5")."""
    kind, number = item
    for found in re.finditer(rf"(?<![\w.])(#?){number}(?!\w|\.\d)", said):
        if found.group(1):
            return True
        before = re.search(r"(\w+)\W*$", said[: found.start()])
        word = before.group(1) if before else ""
        if word.lower() in (kind, "number", "no", "nr") or decision.asks.fullmatch(word):
            return True
    return False


# Why a bare agreement ("yes", "go ahead") that is no reply to the item's message, and names it not, may be meant for
# something else in the conversation as it is now (a worker's question waiting, several proposals pending); None when
# it may not. Access gives it (access.py `unclear`): it reads the store, and which proposals the caller decides.
Unclear = Callable[[Caller, tuple[str, int] | None], Awaitable[str | None]]


_QUESTION_WAITS = "a worker's question is waiting for your answer, and a bare agreement may answer it"


def unless_a_question_waits(store: Connection) -> Unclear:
    """The `Unclear` of a decision that no other pending item can be confused with (a schedule, a standing note):
    a bare agreement is ambiguous only while a worker's question waits in the conversation."""

    async def unclear(caller: Caller, item: tuple[str, int] | None) -> str | None:
        return _QUESTION_WAITS if await AskedQuestions(store).waiting_in(caller.chat_id) else None

    return unclear


async def _why_not(
    turn: TurnScope, caller: Caller, decision: Decision, subject: str, unclear: Unclear | None
) -> str | None:
    """Why the turn's words do not decide the call; None when they do."""
    reading = _reading(turn.said, decision)
    if reading is None:
        return _NOT_ASKED
    item = item_of(subject)
    if item is not None and names_item(turn.said, item, decision):
        return None  # the words name the very item
    if turn.replied is not None and turn.replied != item:
        # said to the replied one: a bare agreement agrees to that one alone, and no words decide another
        # proposal or task than the one replied to unless they name its number (a model that swapped the id)
        if reading == AGREES or item is not None:
            kind, number = turn.replied
            return f"your message replied to {kind} #{number}"
    if turn.replied is None and reading == AGREES and unclear is not None:
        return await unclear(caller, item)
    return None


async def decided_by_own_words(
    notifier: Notifier,
    caller: Caller,
    decision: Decision,
    subject: str,
    buttons: Buttons | None = None,
    unclear: Unclear | None = None,
) -> None:
    """Nothing when the call is outside a chat turn, or the turn's words decide it (`_why_not`); else the chat is
    told (once a turn) what the assistant wanted, with the `buttons` that decide it, and the call is refused.
    `subject` is Markdown the bot wrote ("**task #3**"), with any text it quotes already literal (outside_text).
    With `unclear`, a bare agreement that is ambiguous in the conversation decides nothing."""
    turn = current_turn()
    if turn is None:
        return
    why = await _why_not(turn, caller, decision, subject, unclear)
    if why is None:
        return
    verb = decision.verb
    decides = f"only your own words or the {decision.button} button" if buttons else "only your own words"
    if not turn.confirm_asked:
        turn.confirm_asked = True
        if why == _NOT_ASKED:
            text = f"The assistant wants to {verb} {subject}, which your message did not ask for: {decides} decide it."
        else:
            text = f"The assistant wants to {verb} {subject}, but {why}: {decides} decide it."
        if buttons:
            text += f" Press {decision.button} if you want it."
        elif decision.example:
            text += f" Say so if you want it (for example “{decision.example}”)."
        with contextlib.suppress(Exception):  # the refusal stands even if the notice could not be shown
            await notifier.send(caller.chat_id, text, buttons=buttons)
    shown = " (the chat shows the button now)" if buttons else ""
    theirs = decides.replace("your", "their")
    plain = subject.replace("**", "")
    if why == _NOT_ASKED:
        told = f"the user's message did not ask to {verb} {plain}"
    else:  # it asked for such a decision, but not clearly for this one
        reason = why.replace("your", "the user's")
        told = f"{reason}, so it does not decide to {verb} {plain}"
    raise ToolError(f"not done: {told}, and {theirs} decide it{shown}; do not ask again this turn")
