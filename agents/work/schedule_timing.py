"""When a schedule runs, without I/O: its three forms checked (one sentence per mistake), turned into an APScheduler
trigger, and said in words in the owner's time zone.

A schedule says when by exactly one of: `cron`, a 5-field crontab expression read in TIMEZONE; `at`, an ISO 8601 time
for one run (no offset: TIMEZONE's); `every_minutes`, an interval of at least one minute counted from its making.
APScheduler 3 numbers weekdays from Monday = 0, crontab from Sunday = 0: the weekday field is translated to names
first, so `0 9 * * 1-5` means weekdays as in every crontab.

Every time is checked into a range that can be stored and shown before anything is stored: a one-time run lies at
most MAX_AHEAD ahead (a time near year 9999 cannot be shown in the owner's zone); an interval is a finite whole number
of minutes; a cron expression must fire within MAX_AHEAD, found by a search that looks no further (APScheduler's own
search for a next time that never comes runs to year 9999 on the event loop).
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from agents.core.errors import ToolError
from agents.core.models import Schedule

MAX_EVERY_MINUTES = 366 * 24 * 60  # a year: longer intervals are a mistake, not a schedule
MAX_AHEAD = timedelta(days=366)  # a schedule's first run lies within a year (a cron's, a one-time run's)
_WEEKDAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")  # crontab: 0 and 7 are Sunday
_CRON_EXAMPLE = "5 fields, minute hour day-of-month month weekday, e.g. '0 9 * * 1-5' for weekdays at 09:00"
# One crontab field: `*`, numbers, ranges, steps, lists; names only where crontab has them (months, weekdays). What
# only APScheduler reads (`last`, `2nd mon`, `L`, `#`) is refused: a Temporal Schedule reads crontab alone, and a
# schedule must mean the same under both engines.
_CRON_ITEM = r"(?:\*|{word}(?:-{word})?)(?:/\d+)?"
_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_DAYS = "sun|mon|tue|wed|thu|fri|sat"
_CRON_FIELDS = tuple(
    re.compile(f"{item}(?:,{item})*", re.IGNORECASE)
    for item in (
        _CRON_ITEM.format(word=r"\d+"),
        _CRON_ITEM.format(word=r"\d+"),
        _CRON_ITEM.format(word=r"\d+"),
        _CRON_ITEM.format(word=rf"(?:\d+|{_MONTHS})"),
        _CRON_ITEM.format(word=rf"(?:\d+|{_DAYS})"),
    )
)
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "weekday")


@dataclass(frozen=True)
class When:
    """One schedule's timing, checked: exactly one field is set."""

    cron: str | None = None
    at: datetime | None = None  # aware
    every_minutes: int | None = None


def crontab_weekdays(field: str) -> str:
    """A crontab weekday field (0/7 = Sunday) as APScheduler 3 reads it: names, so no number is misread."""
    names: list[str] = []
    for part in field.lower().split(","):
        numeric = re.fullmatch(r"(\*|\d+)(?:-(\d+))?(?:/(\d+))?", part)
        if numeric is None or (numeric[1] == "*" and numeric[2]):
            names.append(part)  # names (mon-fri), or something the trigger itself refuses
            continue
        if numeric[1] == "*" and numeric[3] is None:
            names.append("*")
            continue
        first = 0 if numeric[1] == "*" else int(numeric[1])
        last = int(numeric[2]) if numeric[2] else (6 if numeric[3] else first)
        step = int(numeric[3]) if numeric[3] else 1
        if not (0 <= first <= 7 and 0 <= last <= 7) or step < 1 or first > last:
            raise ValueError(f"the weekday field {field!r} is not within 0-7 (0 and 7 are Sunday)")
        names.extend(_WEEKDAY_NAMES[n] for n in range(first, last + 1, step))
    return ",".join(dict.fromkeys(names))


class OncePerWallTime(CronTrigger):  # type: ignore[misc]  # APScheduler 3 ships no type hints
    """A crontab trigger of a fixed hour that fires a wall-clock time once: on the night the clocks go back, 02:30
    happens twice, and APScheduler matches both (a daily run would run twice that night). An expression whose hour
    is a wildcard (`*`, `*/2`) runs by the clock as it goes, the repeated hour too, as cron does: an hourly run never
    waits two hours."""

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        fire: datetime | None = super().get_next_fire_time(previous_fire_time, now)
        if fire is None or previous_fire_time is None or not _same_wall_time(fire, previous_fire_time):
            return fire
        # the repeated time: the next fire after it (APScheduler, asked from within the repeated hour, answers that
        # same time again, so it is asked from further on, an hour at most: the clocks go back by one)
        for minutes in (1, 5, 15, 30, 61):
            later: datetime | None = super().get_next_fire_time(fire, fire + timedelta(minutes=minutes))
            if later is None or later != fire:
                return later
        return None


def _same_wall_time(a: datetime, b: datetime) -> bool:
    """Whether two moments show the same time on the zone's clock (naive datetimes compare without `fold`)."""
    zone = a.tzinfo
    return a.astimezone(zone).replace(tzinfo=None) == b.astimezone(zone).replace(tzinfo=None)


def crontab_only(expression: str) -> None:
    """ValueError unless each field is plain crontab (see _CRON_FIELDS)."""
    for name, field, pattern in zip(_FIELD_NAMES, expression.split(), _CRON_FIELDS, strict=False):
        if pattern.fullmatch(field) is None:
            raise ValueError(f"its {name} field {field!r} is not crontab's (numbers, *, ranges, steps, lists)")


def crontab_expressions(expression: str) -> list[str]:
    """A 5-field crontab expression as expressions whose days match as every field does (all at once), the weekdays
    as names (`crontab_weekdays`): one, or two when both day fields are restricted (neither starts with `*`), where
    crontab runs on either day (`0 9 15 * 1`: the 15th, and every Monday) while APScheduler and Temporal would want
    both at once (only a Monday the 15th). A schedule is when either of them fires."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"it has {len(fields)} field{'s' if len(fields) != 1 else ''}")
    fields[4] = crontab_weekdays(fields[4])
    if fields[2].startswith("*") or fields[4].startswith("*"):
        return [" ".join(fields)]
    return [" ".join([*fields[:4], "*"]), " ".join([*fields[:2], "*", *fields[3:]])]


def cron_trigger(expression: str, zone: tzinfo) -> BaseTrigger:
    """The APScheduler trigger of a crontab expression: its one trigger, or the earlier of its two (see above)."""
    triggers = []
    for each in crontab_expressions(expression):
        trigger = CronTrigger if each.split()[1].startswith("*") else OncePerWallTime  # a wildcard hour: every hour
        triggers.append(trigger.from_crontab(each, timezone=zone))
    return triggers[0] if len(triggers) == 1 else OrTrigger(triggers)


def parse_when(
    cron: str | None, at: str | None, every_minutes: int | float | str | None, zone: tzinfo, now: datetime
) -> When:
    """The timing the tool was given, checked; ToolError (one sentence) for a mistake."""
    given = [name for name, value in (("cron", cron), ("at", at), ("every_minutes", every_minutes)) if _given(value)]
    if len(given) != 1:
        named = ", ".join(given) if given else "none"
        raise ToolError(f"give exactly one of cron, at and every_minutes (got {named})")
    if _given(cron):
        expression = " ".join(str(cron).split())
        try:
            trigger = cron_trigger(expression, zone)
            crontab_only(expression)
        except ValueError as err:
            raise ToolError(f"invalid cron expression {expression!r} ({err}): it takes {_CRON_EXAMPLE}") from None
        if fire_within(trigger, now, MAX_AHEAD) is None:
            raise ToolError(f"the cron expression {expression!r} never matches a time within a year")
        return When(cron=expression)
    if _given(at):
        try:
            moment = datetime.fromisoformat(str(at).strip())
        except ValueError:
            raise ToolError(f"{at!r} is not an ISO 8601 time such as 2026-03-02T07:00") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone)
        try:  # in UTC first: a time near year 1 or 9999 may have no UTC (or local) equivalent to store or show
            ahead = moment.astimezone(UTC) - now.astimezone(UTC)
        except OverflowError:
            ahead = None
        if ahead is None or ahead > MAX_AHEAD:
            raise ToolError(f"{str(at).strip()!r} is too far ahead: a schedule's first run lies within a year")
        if moment <= now:
            raise ToolError(f"{when_text(moment, zone)} is in the past (it is now {when_text(now, zone)})")
        return When(at=moment)
    try:
        minutes = float(str(every_minutes).strip())
    except ValueError:
        raise ToolError(f"every_minutes must be a number of minutes (got {every_minutes!r})") from None
    if not math.isfinite(minutes):
        raise ToolError(f"every_minutes must be a finite number of minutes (got {every_minutes})")
    if minutes < 1 or minutes != int(minutes):
        raise ToolError(f"an interval must be a whole number of minutes, at least 1 (got {every_minutes})")
    if minutes > MAX_EVERY_MINUTES:
        raise ToolError("an interval can be at most a year; use cron for rarer runs")
    return When(every_minutes=int(minutes))


def fire_within(trigger: BaseTrigger, now: datetime, horizon: timedelta) -> datetime | None:
    """The trigger's next time after `now` if it comes within `horizon`; the search looks no further (a copy of the
    trigger that ends there: APScheduler stops at its end date). Either of two triggers: the earlier."""
    if isinstance(trigger, OrTrigger):
        found_each = [fire_within(each, now, horizon) for each in trigger.triggers]
        return min((found for found in found_each if found is not None), default=None)
    bounded = copy.copy(trigger)
    bounded.end_date = now.astimezone(trigger.timezone) + horizon
    found: datetime | None = bounded.get_next_fire_time(None, now)
    return found


def _given(value: object) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


def trigger_of(schedule: Schedule, zone: tzinfo) -> BaseTrigger:
    """The APScheduler trigger of a stored schedule."""
    if schedule.cron:
        return cron_trigger(schedule.cron, zone)
    if schedule.at is not None:
        return DateTrigger(run_date=schedule.at, timezone=zone)
    minutes = schedule.every_minutes or 1  # the first run one interval after its making
    return IntervalTrigger(minutes=minutes, start_date=schedule.created_at + timedelta(minutes=minutes), timezone=zone)


def first_run(schedule: Schedule, zone: tzinfo, now: datetime) -> datetime | None:
    upcoming: datetime | None = trigger_of(schedule, zone).get_next_fire_time(None, now)  # APScheduler is untyped
    return upcoming


def when_text(moment: datetime | None, zone: tzinfo) -> str:
    """'Mon 02 Mar 09:00 CET': a time as the owner reads it."""
    if moment is None:
        return "never"
    try:
        return moment.astimezone(zone).strftime("%a %d %b %H:%M %Z").strip()
    except OverflowError:  # a time stored before times were checked, near year 1 or 9999: shown as stored
        return moment.isoformat(timespec="minutes")


def cadence(schedule: Schedule, zone: tzinfo) -> str:
    """How often, in words: 'cron `0 9 * * 1-5`', 'once', 'every 2 hours'."""
    if schedule.cron:
        return f"cron `{schedule.cron}`"
    if schedule.at is not None:
        return "once"
    minutes = schedule.every_minutes or 1
    for unit, size in (("day", 1440), ("hour", 60)):
        if minutes % size == 0:
            count = minutes // size
            return f"every {unit}" if count == 1 else f"every {count} {unit}s"
    return "every minute" if minutes == 1 else f"every {minutes} minutes"
