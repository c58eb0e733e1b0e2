"""Inline buttons as data: what a button says and the action it names (`Action`), built and read in one place."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agents.core.ids import parse_id


@dataclass(frozen=True)
class Button:
    """An inline button: what it says, and the callback data it sends back (e.g. `proposal:approve:3`). A button
    that opens the review page instead (`web_app`: its URL) sends nothing back: in a private chat it is a Mini App
    button, in a group (where Telegram allows none) a link to the bot's Mini App carrying `start_param`."""

    label: str
    data: str
    web_app: str = ""
    start_param: str = ""


Buttons = list[list[Button]]


def button_fields(b: Button) -> list[str]:
    """A button as stored (the outbox, a runner's payload): `Button(*fields)` makes it again; a callback button
    is stored as [label, data], as before review buttons existed."""
    return [b.label, b.data, b.web_app, b.start_param] if b.web_app else [b.label, b.data]


class Action(StrEnum):
    """What an inline button does; its callback data is `<action>:<id>` (built by `button`, read by `parse_action`)."""

    APPROVE = "proposal:approve"
    REJECT = "proposal:reject"
    CANCEL = "task:cancel"
    RESUME = "task:resume"
    MERGE = "task:merge"
    DIFF = "task:diff"
    DISCARD = "task:discard"
    OPEN_PR = "task:pr"
    FIX_CI = "task:fixci"
    NET_ONCE = "net:once"
    NET_TASK = "net:task"
    NET_DENY = "net:deny"
    CANCEL_SCHEDULE = "schedule:cancel"
    NOTE_FORGET = "note:forget"  # /notes: forget a standing note
    ASK_OPTION = "ask:option"  # an option of a worker's question (id: question id × 10 + option index)
    MERGE_ATTEMPTS = "attempts:merge"  # an attempt group's pick merged, the other attempts discarded (id: the group)
    DISCARD_ATTEMPTS = "attempts:discard"  # every attempt of a group discarded (id: the group)

    @property
    def about_proposal(self) -> bool:
        return self.value.startswith("proposal:")


def button(label: str, action: Action, item_id: int) -> Button:
    return Button(label, f"{action.value}:{item_id}")


def parse_action(data: str | None) -> tuple[Action, int] | None:
    """The action and id a button's callback data names, or None for anything else (old or forged data)."""
    head, _, raw_id = (data or "").rpartition(":")
    item_id = parse_id(raw_id)
    try:
        return (Action(head), item_id) if item_id is not None else None
    except ValueError:
        return None


def review_button(task_id: int, review_url: str) -> Button:
    """The summary's Review button: the task's review page under REVIEW_URL (only its number is in the URL)."""
    return Button("🔍 Review", "", web_app=f"{review_url.rstrip('/')}/task/{task_id}", start_param=f"task_{task_id}")


def with_review(buttons: Buttons | None, task_id: int, review_url: str | None) -> Buttons | None:
    """A summary made elsewhere (a Temporal runner, whose settings need no REVIEW_URL) gets the bot's Review row:
    when the summary has the task's Merge (it committed), REVIEW_URL is set, and it has none yet."""
    merge = f"{Action.MERGE.value}:{task_id}"
    if not review_url or not buttons or not any(b.data == merge for row in buttons for b in row):
        return buttons
    if any(b.web_app for row in buttons for b in row):
        return buttons
    return [*buttons, [review_button(task_id, review_url)]]
