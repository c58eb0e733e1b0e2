"""When a schedule runs: crontab weekdays as crontab means them, one sentence per mistake, times in the owner's zone."""

from __future__ import annotations

import sys
import types
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agents.core.errors import ToolError
from agents.core.models import Schedule, WorkerKind
from agents.core.settings import Settings
from agents.work.schedule_timing import (
    cadence,
    cron_trigger,
    crontab_expressions,
    crontab_weekdays,
    first_run,
    parse_when,
    trigger_of,
    when_text,
)

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 26, 18, 0, tzinfo=UTC)  # a Thursday; 19:00 in Berlin (CET)


def schedule(**when: object) -> Schedule:
    return Schedule(chat_id=1, workspace="calc", worker=WorkerKind.TEST, instructions="run", created_at=NOW, **when)


@pytest.mark.parametrize(
    ("field", "names"),
    [
        ("1-5", "mon,tue,wed,thu,fri"),
        ("0", "sun"),
        ("7", "sun"),
        ("0,6", "sun,sat"),
        ("5-7", "fri,sat,sun"),
        ("*/2", "sun,tue,thu,sat"),
        ("*", "*"),
        ("mon-fri", "mon-fri"),
    ],
)
def test_crontab_weekdays_are_read_from_sunday(field: str, names: str) -> None:
    assert crontab_weekdays(field) == names


def test_weekdays_at_nine_next_runs_on_friday_in_the_owners_zone() -> None:
    when = parse_when("0 9 * * 1-5", None, None, BERLIN, NOW)
    upcoming = first_run(schedule(cron=when.cron), BERLIN, NOW)
    assert when_text(upcoming, BERLIN) == "Fri 27 Nov 09:00 CET"
    after_friday = trigger_of(schedule(cron=when.cron), BERLIN).get_next_fire_time(upcoming, upcoming)
    assert when_text(after_friday, BERLIN) == "Mon 30 Nov 09:00 CET", "weekends are skipped, as crontab means 1-5"


@pytest.mark.parametrize(
    ("cron", "at", "every", "says"),
    [
        ("61 9 * * *", None, None, "invalid cron expression '61 9 * * *'"),
        ("0 9 * *", None, None, "invalid cron expression '0 9 * *' (it has 4 fields)"),
        ("0 9 * * 8", None, None, "not within 0-7"),
        (None, "2026-11-26T18:59", None, "Thu 26 Nov 18:59 CET is in the past (it is now Thu 26 Nov 19:00 CET)"),
        (None, "tomorrow at 7", None, "is not an ISO 8601 time"),
        (None, None, 0, "at least 1"),
        (None, None, 0.5, "at least 1"),
        (None, None, "soon", "must be a number of minutes"),
        (None, None, None, "give exactly one of cron, at and every_minutes (got none)"),
        ("0 9 * * *", None, 5, "give exactly one of cron, at and every_minutes (got cron, every_minutes)"),
        ("0 0 31 2 *", None, None, "never matches"),
        ("59 23 31 2,4,6,9,11 *", None, None, "never matches a time within a year"),
        (None, "9999-12-31T23:30Z", None, "'9999-12-31T23:30Z' is too far ahead"),
        (None, "9999-12-31T23:30", None, "is too far ahead"),
        (None, "0001-01-01T00:00+05:00", None, "is too far ahead"),
        (None, "2028-01-01T00:00", None, "is too far ahead: a schedule's first run lies within a year"),
        (None, None, float("nan"), "must be a finite number of minutes"),
        (None, None, float("inf"), "must be a finite number of minutes"),
        (None, None, "1e400", "must be a finite number of minutes (got 1e400)"),
    ],
)
def test_bad_timing_gets_one_sentence(cron: str | None, at: str | None, every: object, says: str) -> None:
    with pytest.raises(ToolError) as refused:
        parse_when(cron, at, every, BERLIN, NOW)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_cron_that_never_fires_is_refused_after_a_search_of_one_year_only() -> None:
    """APScheduler's own search for a next time runs to year 9999 (hundreds of thousands of steps on the event loop);
    the check looks one year ahead and no further. Counted in steps of the search, not timed."""
    steps = 0

    def count(frame: types.FrameType, event: str, _arg: object) -> None:
        nonlocal steps
        if event == "call" and frame.f_code.co_name == "get_next_value" and "apscheduler" in frame.f_code.co_filename:
            steps += 1

    sys.setprofile(count)
    try:
        with pytest.raises(ToolError, match="never matches"):
            parse_when("59 23 31 2,4,6,9,11 *", None, None, BERLIN, NOW)
    finally:
        sys.setprofile(None)
    assert 0 < steps < 1000, f"{steps:,} steps of the search for a time that never comes"


def test_at_without_an_offset_is_the_owners_time_and_with_one_is_kept() -> None:
    assert parse_when(None, "2026-11-27T07:00", None, BERLIN, NOW).at == datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
    assert parse_when(None, "2026-11-27T07:00Z", None, BERLIN, NOW).at == datetime(2026, 11, 27, 7, 0, tzinfo=UTC)


def test_an_interval_counts_from_its_making_and_says_itself_in_words() -> None:
    every = schedule(every_minutes=120)
    assert first_run(every, BERLIN, NOW) == NOW + timedelta(hours=2)
    assert cadence(every, BERLIN) == "every 2 hours"
    assert cadence(schedule(every_minutes=1), BERLIN) == "every minute"
    assert cadence(schedule(every_minutes=1440), BERLIN) == "every day"
    assert cadence(schedule(every_minutes=90), BERLIN) == "every 90 minutes"


def test_timezone_must_be_an_iana_name_and_defaults_to_the_machines(tmp_path) -> None:
    base = dict(telegram_bot_token="t", anthropic_api_key="k", allowed_user_ids="1", workspace_path=tmp_path)
    assert str(Settings(_env_file=None, timezone="Europe/Berlin", **base).schedules.zone) == "Europe/Berlin"
    assert Settings(_env_file=None, **base).schedules.zone is not None
    with pytest.raises(ValueError, match="IANA time zone"):
        Settings(_env_file=None, timezone="Mars/Olympus", **base)


def test_a_daily_time_in_the_hour_the_clocks_repeat_fires_once_that_night() -> None:
    """Europe/Berlin, 2026-10-25: 02:00-03:00 happens twice. A daily 02:30 runs once that day (APScheduler alone
    matched both), and the spring night, whose 02:30 does not exist, still runs that day."""
    zone = ZoneInfo("Europe/Berlin")
    trigger = cron_trigger("30 2 * * *", zone)

    def fires(now: datetime, count: int) -> list[datetime]:
        found, previous = [], None
        for _ in range(count):
            previous = now = trigger.get_next_fire_time(previous, now)
            found.append(now)
        return found

    autumn = [f.astimezone(zone).date().isoformat() for f in fires(datetime(2026, 10, 24, 12, tzinfo=zone), 4)]
    assert autumn == ["2026-10-25", "2026-10-26", "2026-10-27", "2026-10-28"], autumn
    spring = [f.astimezone(zone).date().isoformat() for f in fires(datetime(2026, 3, 28, 12, tzinfo=zone), 2)]
    assert spring == ["2026-03-29", "2026-03-30"], spring


def test_an_hourly_cron_runs_every_hour_through_the_night_the_clocks_go_back() -> None:
    """`0 * * * *` in Europe/Berlin on 2026-10-25 (02:00-03:00 happens twice): crontab runs a job whose hour is `*` in
    both 02:00s (cronie: wildcard jobs run normally), and `*/15` does here too; an hourly run never waits two hours."""
    zone = BERLIN
    trigger = cron_trigger("0 * * * *", zone)
    previous, now, fires = None, datetime(2026, 10, 24, 22, 30, tzinfo=UTC), []
    for _ in range(6):
        previous = now = trigger.get_next_fire_time(previous, now)
        fires.append(now)
    gaps = [b.astimezone(UTC) - a.astimezone(UTC) for a, b in zip(fires, fires[1:], strict=False)]  # real time
    shown = [f"{f.astimezone(zone):%H:%M %Z}" for f in fires]
    assert all(g == timedelta(hours=1) for g in gaps), f"hourly runs that night: {shown}"


@pytest.mark.parametrize("expression", ["0 9 last * *", "0 9 L * *", "0 9 * * mon#2", "0 9 * * 5L", "0 9 ? * *"])
def test_a_cron_only_apscheduler_reads_is_refused_in_one_sentence(expression: str) -> None:
    """Both engines must read a schedule alike: a Temporal Schedule reads crontab alone, so APScheduler's own
    additions (the last day, the Nth weekday) are refused before anything is stored."""
    with pytest.raises(ToolError, match=r"^invalid cron expression .*: it takes 5 fields"):
        parse_when(expression, None, None, UTC, datetime(2026, 3, 2, tzinfo=UTC))


@pytest.mark.parametrize("expression", ["0 9 1,15 jan-jun mon-fri", "*/5 * * * *", "0 9 * * 1/2", "5/15 9-17 * * 7"])
def test_plain_crontab_with_names_steps_and_lists_is_accepted(expression: str) -> None:
    assert parse_when(expression, None, None, UTC, datetime(2026, 3, 2, tzinfo=UTC)).cron == expression


def test_a_cron_with_both_day_fields_runs_on_either_day_as_crontab_does() -> None:
    """`0 9 15 * 1`: the 15th of each month and every Monday (crontab's rule when both day fields are restricted),
    not only a Monday the 15th (APScheduler's and Temporal's reading of the one expression)."""
    monday = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday, after 09:00
    trigger = cron_trigger("0 9 15 * 1", ZoneInfo("UTC"))
    assert trigger.get_next_fire_time(None, monday) == datetime(2026, 3, 9, 9, 0, tzinfo=UTC)  # the next Monday
    friday = datetime(2026, 3, 13, 10, 0, tzinfo=UTC)
    assert trigger.get_next_fire_time(None, friday) == datetime(2026, 3, 15, 9, 0, tzinfo=UTC)  # the 15th, a Sunday
    assert crontab_expressions("0 9 15 * 1") == ["0 9 15 * *", "0 9 * * mon"]
    assert crontab_expressions("0 9 */2 * 1") == ["0 9 */2 * mon"], "a day field starting with * is unrestricted"
    assert crontab_expressions("0 9 15 * *") == ["0 9 15 * *"]
    when = parse_when("30 8 1 * 5", None, None, ZoneInfo("UTC"), NOW)
    assert when.cron == "30 8 1 * 5"
    assert first_run(schedule(cron=when.cron), ZoneInfo("UTC"), NOW) == datetime(2026, 11, 27, 8, 30, tzinfo=UTC)
