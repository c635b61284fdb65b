"""Temporal support (spec §8.3): the deterministic grammar of dates in a quote.

An extracted candidate may carry ``valid_from``, ``valid_until`` or ``review_at`` only when
its evidence quote contains the matching temporal expression ("since March", "until Friday",
"in two weeks"). :func:`find_expressions` reads the quote with a fixed expression list and
resolves each match against the turn's timestamp; :func:`unsupported_fields` names every
temporal field no expression supports. Unsupported metadata is rejected, never guessed or
silently dropped. Search reads the same grammar: a query's dates become event-time windows
(:mod:`retold.retrieve.time_window`), and :func:`mentions_time` tells which candidates say
when (:mod:`retold.retrieve.time_answers`). Time-driven review (spec §8.4) is
:mod:`retold.ingest.write.temporal_review`.

One job: the grammar of dates in text; it is long because every form of expression it
accepts (absolute, relative, part of a period, counted) is a small resolver of its own.

    >>> from datetime import datetime, UTC
    >>> turn_at = datetime(2026, 3, 4, 10, tzinfo=UTC)  # a Wednesday
    >>> [e.text for e in find_expressions("I'm in Lisbon until Friday", turn_at)]
    ['until Friday']
    >>> unsupported_fields("I'm in Lisbon until Friday", turn_at,
    ...                    valid_until=datetime(2026, 3, 6, tzinfo=UTC))
    []
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Literal

__all__ = ["TemporalExpression", "find_expressions", "mentions_time", "unsupported_fields"]

Role = Literal["from", "until", "point"]
Span = tuple[date, date]  # inclusive

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
# Full names only: "sun", "sat" and "wed" are ordinary words far more often than days.
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a few": 3,
}

_FROM_MARKERS = (
    "since",
    "from",
    "starting",
    "starting on",
    "starting from",
    "beginning",
    "as of",
    "effective",
    "after",
    "from now on",
)
_UNTIL_MARKERS = (
    "until",
    "till",
    "til",
    "through",
    "thru",
    "by",
    "before",
    "ending",
    "ends",
    "ends on",
    "expires",
    "expires on",
    "due",
    "due on",
    "up to",
    "no later than",
)
_MARKER = (
    r"(?P<marker>no later than|starting (?:on|from)|ends on|expires on|due on|from now on|as of|up to|"
    r"since|from|starting|beginning|effective|after|until|till|til|through|thru|by|before|ending|ends|"
    r"expires|due|in|on|during|at|for)?\s*"
)
_MONTH_NAMES = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY_NAMES = "|".join(sorted(_WEEKDAYS, key=len, reverse=True))
_NUMBER = (
    r"(?P<n>\d{1,3}|a couple of|a few|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(?P<unit>day|week|fortnight|month|year)s?"


@dataclass(frozen=True)
class TemporalExpression:
    """One temporal phrase of a quote, resolved against the turn's timestamp."""

    text: str
    role: Role  # "from" after since/from/as of, "until" after until/by/through, else "point"
    spans: tuple[Span, ...]  # the calendar days it can mean (inclusive); several when English is ambiguous
    marker: str = field(default="", compare=False)  # the word before it that set the role ("since", "as of")


def _day(ref: datetime) -> date:
    return ref.astimezone(UTC).date() if ref.tzinfo else ref.date()


def _add_months(day: date, months: int) -> date:
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _month_span(year: int, month: int) -> Span:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _nearest_year(ref: date, month: int, day: int = 1) -> int:
    """The year that puts month/day closest to the turn (a yearless date means the near one)."""
    day = min(max(day, 1), 28)  # "February 0th" still picks a year; _safe_date then refuses the day
    return min((ref.year - 1, ref.year, ref.year + 1), key=lambda y: abs((date(y, month, day) - ref).days))


def _since(m: re.Match[str]) -> bool:
    """Whether the expression follows "since", which looks back: "since May" said in March is last May."""
    return (m["marker"] or "").lower() == "since"


def _latest_year(ref: date, month: int, day: int) -> int:
    """The year of the latest month/day not after the turn (a yearless date after "since")."""
    return ref.year if (month, day) <= (ref.month, ref.day) else ref.year - 1


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


# --- resolvers: match → spans --------------------------------------------------------------------

Resolver = Callable[[re.Match[str], date], tuple[Span, ...]]


def _iso(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    day = _safe_date(int(m["y"]), int(m["m"]), int(m["d"]))
    return ((day, day),) if day else ()


def _month_day(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    month = _MONTHS[m["month"].lower()]
    day_number = int(m["d"])
    if m["y"]:
        year = int(m["y"])
    elif _since(m):
        year = _latest_year(ref, month, day_number)
    else:
        year = _nearest_year(ref, month, day_number)
    day = _safe_date(year, month, day_number)
    return ((day, day),) if day else ()


def _numeric(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    """``03/04/2026``: month first (US) and day first (most elsewhere) both, when both are dates."""
    a, b, year = int(m["a"]), int(m["b"]), int(m["y"])
    days = sorted({d for d in (_safe_date(year, a, b), _safe_date(year, b, a)) if d})
    return tuple((d, d) for d in days)


def _month_year(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    year, month = int(m["y"]), _MONTHS[m["month"].lower()]
    return (_month_span(year, month),) if _safe_date(year, month, 1) else ()  # "March 0000": no span


def _month_alone(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    month = _MONTHS[m["month"].lower()]
    year = _latest_year(ref, month, 1) if _since(m) else _nearest_year(ref, month, 15)
    return (_part_of(_month_span(year, month), m["part"]),)


def _end_of_month(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    month = _MONTHS[m["month"].lower()]
    year = int(m["y"]) if m["y"] else _nearest_year(ref, month, 15)
    if not _safe_date(year, month, 1):
        return ()
    last = _month_span(year, month)[1]
    return ((last, last),)


def _year_alone(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    year = int(m["y"])
    return (_part_of((date(year, 1, 1), date(year, 12, 31)), m["part"]),)


def _part_of(span: Span, part: str | None) -> Span:
    """The first, middle or last third of a month or year ("early May", "mid-2023", "the end of")."""
    word = (part or "").lower().removeprefix("the").strip()
    if not word:
        return span
    first, last = span
    third = ((last - first).days + 1) // 3
    if word.startswith(("early", "beginning", "start")):
        return first, first + timedelta(days=third - 1)
    if word.startswith("mid"):  # "mid", "mid-", "middle of"
        return first + timedelta(days=third), last - timedelta(days=third)
    return last - timedelta(days=third - 1), last  # "late"


def _month_part(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    """A part of a named month: "early May 2023", "the middle of March", "late October"."""
    month = _MONTHS[m["month"].lower()]
    year = int(m["y"]) if m["y"] else _nearest_year(ref, month, 15)
    if not _safe_date(year, month, 1):
        return ()
    return (_part_of(_month_span(year, month), m["part"]),)


_ORDINALS = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3}


def _weeks_of_month(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    """ "the second week of November", "the last two weeks of August 2023", "the first weekend of
    October": weeks counted from the month's first day (or back from its last), weekends as the
    month's Saturdays with the Sunday after."""
    month = _MONTHS[m["month"].lower()]
    year = int(m["y"]) if m["y"] else _nearest_year(ref, month, 15)
    if not _safe_date(year, month, 1):
        return ()
    first, last = _month_span(year, month)
    raw = (m["count"] or "").lower()
    count = int(raw) if raw.isdigit() else _NUMBERS.get(raw, 1)
    which = m["which"].lower()
    if m["unit"].lower().startswith("weekend"):
        saturdays = [first + timedelta(days=(5 - first.weekday()) % 7 + 7 * i) for i in range(5)]
        saturdays = [day for day in saturdays if day <= last]
        chosen = saturdays[-count:] if which == "last" else saturdays[_ORDINALS[which] :][:count]
        if not chosen:
            return ()
        return ((chosen[0], chosen[-1] + timedelta(days=1)),)
    if which == "last":
        return ((last - timedelta(days=7 * count - 1), last),)
    start = first + timedelta(weeks=_ORDINALS[which])
    end = min(start + timedelta(days=7 * count - 1), last)
    return ((start, end),) if start <= last else ()


_DAY_OFFSETS = {"today": 0, "tonight": 0, "now": 0, "tomorrow": 1, "yesterday": -1,
                "day after tomorrow": 2, "day before yesterday": -2}  # fmt: skip


def _relative_day(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    day = ref + timedelta(days=_DAY_OFFSETS[" ".join(m["word"].lower().split())])
    return ((day, day),)


def _relative_period(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    which, unit = m["which"].lower(), m["period"].lower()
    shift = {"this": 0, "next": 1, "last": -1, "coming": 1}[which]
    if unit == "week":
        start = _week_start(ref) + timedelta(weeks=shift)
        span = (start, start + timedelta(days=6))
    elif unit == "weekend":
        saturday = _week_start(ref) + timedelta(weeks=shift, days=5)
        span = (saturday, saturday + timedelta(days=1))
    elif unit == "month":
        first = _add_months(ref.replace(day=1), shift)
        span = _month_span(first.year, first.month)
    else:
        year = ref.year + shift
        span = (date(year, 1, 1), date(year, 12, 31))
    if m["end"]:
        return ((span[1], span[1]),)
    return (span,)


def _end_of(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    unit = m["period"].lower()
    if unit == "week":
        day = _week_start(ref) + timedelta(days=6)
    elif unit == "month":
        day = _month_span(ref.year, ref.month)[1]
    else:
        day = date(ref.year, 12, 31)
    return ((day, day),)


def _count(m: re.Match[str]) -> tuple[int, str]:
    raw = m["n"].lower()
    n = int(raw) if raw.isdigit() else _NUMBERS[raw]
    unit = m["unit"].lower()
    if unit == "fortnight":
        return 2 * n, "week"
    return n, unit


def _shift(ref: date, n: int, unit: str) -> date:
    if unit == "day":
        return ref + timedelta(days=n)
    if unit == "week":
        return ref + timedelta(weeks=n)
    if unit == "month":
        return _add_months(ref, n)
    return _add_months(ref, 12 * n)


def _in_n(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    n, unit = _count(m)
    day = _shift(ref, n, unit)
    return ((day, day),)


def _n_ago(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    n, unit = _count(m)
    day = _shift(ref, -n, unit)
    return ((day, day),)


def _weekday(m: re.Match[str], ref: date) -> tuple[Span, ...]:
    target = _WEEKDAYS[m["weekday"].lower()]
    which = (m["which"] or "").lower()
    if which == "last" or (not which and _since(m)):
        back = (ref.weekday() - target) % 7  # "since Monday" may mean today; "last Monday" never does
        day = ref - timedelta(days=back or (7 if which else 0))
        return ((day, day),)
    ahead = (target - ref.weekday()) % 7
    upcoming = ref + timedelta(days=ahead)
    if which == "next":  # "next Friday": the coming one or the one after, as English allows both
        first = upcoming if ahead else ref + timedelta(days=7)
        return ((first, first), (first + timedelta(days=7), first + timedelta(days=7)))
    return ((upcoming, upcoming),)


_PATTERNS: tuple[tuple[str, Resolver], ...] = (
    (r"(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b", _iso),
    (r"(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4})\b", _numeric),
    (
        rf"(?P<month>{_MONTH_NAMES})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y>\d{{4}})\b)?",
        _month_day,
    ),
    (
        rf"(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{_MONTH_NAMES})\b\.?(?:,?\s+(?P<y>\d{{4}})\b)?",
        _month_day,
    ),
    (rf"(?P<month>{_MONTH_NAMES})\.?,?\s+(?P<y>\d{{4}})\b", _month_year),
    (
        rf"(?:the\s+)?(?P<which>first|1st|second|2nd|third|3rd|fourth|4th|last)\s+"
        rf"(?:(?P<count>two|three|2|3)\s+)?(?P<unit>weekends?|weeks?)\s+(?:of|in)\s+(?P<month>{_MONTH_NAMES})\b"
        rf"\.?(?:,?\s+(?P<y>\d{{4}})\b)?",
        _weeks_of_month,
    ),
    (
        rf"(?P<part>(?:the\s+)?(?:beginning|start|middle)\s+of|early|mid|late)[\s-]+(?P<month>{_MONTH_NAMES})"
        rf"\.?,?\s+(?P<y>\d{{4}})\b",
        _month_part,
    ),
    (
        r"(?P<word>day\s+after\s+tomorrow|day\s+before\s+yesterday|today|tonight|tomorrow|yesterday|now)\b",
        _relative_day,
    ),
    (
        r"(?P<end>(?:the\s+)?end\s+of\s+)?(?:the\s+)?(?P<which>this|next|last|coming)\s+(?P<period>weekend|week|month|year)\b",
        _relative_period,
    ),
    (r"(?:the\s+)?end\s+of\s+(?:the\s+)?(?P<period>week|month|year)\b", _end_of),
    (rf"(?:the\s+)?end\s+of\s+(?P<month>{_MONTH_NAMES})\b\.?(?:,?\s+(?P<y>\d{{4}})\b)?", _end_of_month),
    (rf"(?:in|within)\s+{_NUMBER}\s+{_UNIT}\b", _in_n),
    (rf"{_NUMBER}\s+{_UNIT}\s+from\s+now\b", _in_n),
    (rf"{_NUMBER}\s+{_UNIT}\s+ago\b", _n_ago),
    (rf"(?:(?P<which>this|next|last|coming)\s+)?(?P<weekday>{_DAY_NAMES})\b", _weekday),
)
# A month or year on its own is too easily an ordinary word or number ("may", "2000 users"):
# it counts only after a preposition that makes it temporal.
_GUARDED: tuple[tuple[str, Resolver], ...] = (
    (rf"(?P<month>{_MONTH_NAMES})\b(?!\s*\d)", _month_alone),
    (r"(?P<y>(?:19|20)\d{2})\b", _year_alone),
)
_COMPILED = [
    (re.compile(rf"\b{_MARKER}(?P<expr>{pattern})", re.IGNORECASE), resolver)
    for pattern, resolver in _PATTERNS
]
_GUARD_WORDS = "|".join(
    sorted({*_FROM_MARKERS, *_UNTIL_MARKERS, "in", "during", "of"}, key=len, reverse=True)
)
_COMPILED_GUARDED = [
    (
        re.compile(
            rf"\b(?P<marker>{_GUARD_WORDS})\s+(?P<part>early\s+|mid-?\s*|late\s+)?(?P<expr>{pattern})",
            re.IGNORECASE,
        ),
        resolver,
    )
    for pattern, resolver in _GUARDED
]
_OPEN_FROM = re.compile(
    r"\b(?P<expr>from now on|starting (?:now|today)|as of (?:now|today)|from today(?: on(?:wards)?)?|"
    r"going forward|from here on(?: out)?)\b",
    re.IGNORECASE,
)


def _role(marker: str | None) -> Role:
    marker = (marker or "").lower()
    if marker in _FROM_MARKERS:
        return "from"
    if marker in _UNTIL_MARKERS:
        return "until"
    return "point"


def find_expressions(quote: str, turn_at: datetime) -> list[TemporalExpression]:
    """Every temporal expression of ``quote``, resolved against the turn's timestamp (UTC days).

    Overlapping matches keep the longest; a yearless date or a bare weekday means the
    occurrence nearest the turn, or after "since" the latest one not after it; "next Friday"
    and "03/04/2026" keep both readings English allows.
    """
    ref = _day(turn_at)
    found: list[tuple[int, int, TemporalExpression]] = []
    for match in _OPEN_FROM.finditer(quote):
        found.append((match.start(), match.end(), TemporalExpression(match["expr"], "from", ((ref, ref),))))
    for pattern, resolver in (*_COMPILED, *_COMPILED_GUARDED):
        for match in pattern.finditer(quote):
            spans = resolver(match, ref)
            if not spans:
                continue
            text = match.group(0).strip()
            found.append(
                (
                    match.start(),
                    match.end(),
                    TemporalExpression(text, _role(match["marker"]), spans, (match["marker"] or "").lower()),
                )
            )
    # Longest first; drop anything overlapping a longer match already kept.
    found.sort(key=lambda item: (-(item[1] - item[0]), item[0]))
    kept: list[tuple[int, int, TemporalExpression]] = []
    for start, end, expr in found:
        if all(end <= s or start >= e for s, e, _ in kept):
            kept.append((start, end, expr))
    return [expr for _, _, expr in sorted(kept, key=lambda item: item[0])]


def _unnamed(pattern: str) -> str:
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


# Every expression holds one of these words or a digit (months, weekdays, units, relative days,
# "from now on", "going forward", "from here on"); the patterns run only around them.
_UNITS = ("day", "week", "weekend", "fortnight", "month", "year")
_ANCHORS = frozenset({
    *_MONTHS, *_WEEKDAYS, "today", "tonight", "tomorrow", "yesterday", "now", "forward", "here", "ago",
    *_UNITS, *(unit + "s" for unit in _UNITS),
})  # fmt: skip
_WORD = re.compile(r"[A-Za-z]+|\d+")
_WORD_REST = re.compile(r"\w*")
_ANY = re.compile(
    "|".join([
        r"\b(?:" + "|".join(_unnamed(pattern) for pattern, _ in _PATTERNS) + ")",
        *(rf"\b(?:{_GUARD_WORDS})\s+(?:early\s+|mid-?\s*|late\s+)?(?:{_unnamed(p)})" for p, _ in _GUARDED),
        _unnamed(_OPEN_FROM.pattern),
    ]),
    re.IGNORECASE,
)  # fmt: skip
_REACH = 40  # characters an expression can extend either side of its anchor, once spaces are single


def _near_anchors(text: str) -> Iterator[tuple[int, int]]:
    """The stretches of ``text`` within reach of an anchor word, overlapping ones merged, so no
    character is searched twice however many anchors a text holds."""
    lo = hi = -1
    for word in _WORD.finditer(text):
        if not (word.group(0)[0].isdigit() or word.group(0).lower() in _ANCHORS):
            continue
        start = max(0, word.start() - _REACH)
        if start > hi:  # a new stretch: hand on the one before, if any
            if hi >= 0:
                yield lo, hi
            lo = start
        hi = _WORD_REST.match(text, word.end() + _REACH).end()  # a word cut short would end there
    if hi >= 0:
        yield lo, hi


def mentions_time(quote: str) -> bool:
    """Whether :func:`find_expressions` finds anything in ``quote`` (runs of spaces read as one;
    an impossible date such as "February 30" still counts), in a fraction of its time: the
    patterns run only near a word that can anchor an expression."""
    text = " ".join(quote.split())
    return any(_ANY.search(text, lo, hi) for lo, hi in _near_anchors(text))


def _within(value: datetime, spans: tuple[Span, ...], *, exclusive_end: bool) -> bool:
    day = _day(value)
    for start, end in spans:
        if start <= day <= end:
            return True
        # "until Friday" may be stored as the first instant after Friday.
        if (
            exclusive_end
            and day == end + timedelta(days=1)
            and value.astimezone(UTC).time() == datetime.min.time()
        ):
            return True
    return False


def unsupported_fields(
    quote: str | None,
    turn_at: datetime,
    *,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
    review_at: datetime | None = None,
) -> list[str]:
    """The temporal fields the quote does not support (empty when all present ones are supported).

    ``valid_from`` needs a "from" or plain expression covering it; ``valid_until`` an
    "until" or plain one (its end day or the instant after); ``review_at`` any expression
    that is not entirely in the turn's past. ``valid_from`` after ``valid_until`` is
    unsupported too.
    """
    expressions = find_expressions(quote or "", turn_at)
    ref = _day(turn_at)
    out: list[str] = []
    if valid_from is not None and not any(
        e.role in ("from", "point") and _within(valid_from, e.spans, exclusive_end=False) for e in expressions
    ):
        out.append("valid_from")
    if valid_until is not None and not any(
        e.role in ("until", "point") and _within(valid_until, e.spans, exclusive_end=True)
        for e in expressions
    ):
        out.append("valid_until")
    if review_at is not None and not any(
        max(end for _, end in e.spans) >= ref and _within(review_at, e.spans, exclusive_end=True)
        for e in expressions
    ):
        out.append("review_at")
    if valid_from is not None and valid_until is not None and valid_from > valid_until:
        out.extend(f for f in ("valid_from", "valid_until") if f not in out)
    return out
