"""Event and search_log JSON: orjson gives the standard library's text; what orjson refuses still lands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from retold.store.audit import _json, _json_default


def _stdlib(value: object) -> str:
    return json.dumps(value, default=_json_default, separators=(",", ":"))


@dataclass
class _Row:
    at: datetime
    ids: set[str]
    pair: tuple[int, float]


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(JSONISH)
def test_the_same_values_parse_back_from_either_encoder(value: object) -> None:
    assert json.loads(_json(value)) == json.loads(_stdlib(value))


def test_dataclasses_datetimes_sets_and_int_keys_encode_as_before() -> None:
    row = {"row": _Row(datetime(2026, 12, 4, 12, 0, tzinfo=UTC), {"a"}, (1, 0.5)), 7: "seven"}
    assert _json(row) == _stdlib(row)


def test_what_orjson_refuses_falls_back_to_the_standard_library() -> None:
    huge = {"n": 2**80, "s": "lone \ud800 surrogate"}
    assert _json(huge) == _stdlib(huge)


def test_non_finite_floats_are_stored_as_valid_json() -> None:
    # The standard library wrote Infinity and NaN, which are not JSON (SQLite's json functions
    # reject the row); orjson writes null.
    assert json.loads(_json({"x": float("inf"), "y": float("nan")})) == {"x": None, "y": None}
