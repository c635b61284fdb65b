"""Config blocks for search: rewriting, triggers, the relevance gate, freshness (spec §2.3).

One job: the ``retrieval`` section's settings, with their defaults, bounds and descriptions
(``docs/configuration.md`` is generated from them) and the gate floors they resolve to for one
search (:meth:`GateConfig.floors_for`); it is long because every ranking pass and gate rule
has its own documented, calibrated keys here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from retold.config.base import (
    _HAIKU,
    Provider,
    SourceKind,
    Trigger,
    _Block,
    _Flag,
    _Name,
    _NonNegativeInt,
    _PositiveInt,
    _Unit,
)

# --------------------------------------------------------------------------- 2.3 retrieval


class RewriteConfig(_Block):
    """Optional hosted query rewriting from the current turn (spec §2.3, §10.0)."""

    enabled: _Flag = Field(
        False,
        description=(
            "Rewrites the query from the last user and assistant turns before searching. Off by "
            "default because the hosted call sits on the hot path."
        ),
    )
    provider: Provider = Field("anthropic", description="The hosted API the rewrite model is called through.")
    model: _Name = Field(_HAIKU, description="The hosted rewrite model.")
    max_context_chars: _PositiveInt = Field(
        2000,
        description="Caps the current-turn context sent to the rewrite model. Integer >= 1.",
    )
    timeout_ms: _PositiveInt = Field(
        800,
        description=(
            "Bounds the wait; on timeout the raw query is used (rewrite_status = failed). Integer >= 1."
        ),
    )
    max_output_tokens: _PositiveInt = Field(
        512, description="Caps the one structured completion (a short JSON list). Integer >= 1."
    )


class TriggerConfig(_Block):
    """Who calls memory_search: the model, the host, or both (spec §2.3, §14.1)."""

    mode: Literal["tool_only", "auto", "hybrid"] = Field(
        "tool_only",
        description=(
            "tool_only: the model searches through its tool; auto: the host searches once per user "
            "turn; hybrid: both. The pipeline, gate and log are identical in every mode."
        ),
    )
    auto_k: _PositiveInt = Field(
        4,
        description=(
            "k for host-issued searches; smaller than default_k because nobody asked for those "
            "results. Integer >= 1."
        ),
    )
    auto_min_query_chars: _NonNegativeInt = Field(
        12,
        description=(
            "Host-issued search is skipped for user turns shorter than this after whitespace "
            'normalization ("ok" is not a query). Integer >= 0; 0 never skips.'
        ),
    )


class DenseFloors(_Block):
    """Lowest cosine a dense-only candidate of each record type needs (spec §10.5).

    Per type because long episodic summaries score lower against short queries than short
    semantic facts do; ``session_summary`` applies to generated session summaries instead of
    the episodic floor.
    """

    # For sentence-transformers/all-MiniLM-L6-v2, embedding.version "1", with rrf_k 10. The
    # episodic, lexical and relative floors are calibrated on LoCoMo (benchmarks/calibrate_gate.py,
    # docs/benchmarks.md); LoCoMo holds only episodes, so the semantic floor is calibrated on a
    # hand-labelled store of facts (benchmarks/gate_labelled.py: chosen on the calibration set,
    # checked on the held-out separation set); procedural keeps the spec's value, and the
    # summary floor keeps the spec's +0.10 over episodes. Recalibrate after any embedder change.
    semantic: _Unit = Field(0.33, description="Dense floor for semantic records. In [0, 1].")
    episodic: _Unit = Field(0.575, description="Dense floor for episodic records. In [0, 1].")
    procedural: _Unit = Field(0.45, description="Dense floor for procedural records. In [0, 1].")
    session_summary: _Unit = Field(
        0.675,
        description=(
            "Dense floor for generated session summaries, the longest and broadest records and the "
            "likeliest pollution source. In [0, 1]."
        ),
    )

    def for_record(self, record_type: str, source_kind: str | None = None) -> float:
        """The floor for one candidate: session summaries use their own, others their type's."""
        if source_kind == "session_summary":
            return self.session_summary
        floor = {"semantic": self.semantic, "episodic": self.episodic, "procedural": self.procedural}.get(
            record_type
        )
        if floor is None:
            raise ValueError(f"no dense floor for record type {record_type!r}")
        return floor


class AutoDenseFloors(DenseFloors):
    """The stricter dense floors for host-issued searches (spec §2.3 ``gate.auto.dense_floor``)."""

    semantic: _Unit = Field(0.38, description="Dense floor for semantic records, auto trigger. In [0, 1].")
    episodic: _Unit = Field(0.625, description="Dense floor for episodic records, auto trigger. In [0, 1].")
    procedural: _Unit = Field(
        0.55, description="Dense floor for procedural records, auto trigger. In [0, 1]."
    )
    session_summary: _Unit = Field(
        0.625, description="Dense floor for session summaries, auto trigger. In [0, 1]."
    )


_LEXICAL_FRACTION = "Fraction of query terms a lexical-only candidate must contain. In [0, 1]."
_LEXICAL_MATCHED = (
    "Fewest matched terms a lexical-only candidate needs unless one is an entity alias or an identifier "
    "token, so a one-word query cannot admit every record that mentions it. Integer >= 1."
)
_COMMON_WORD_SHARE = (
    "A plain word (not a name as written, an identifier or an alias) in more than this share of the "
    "searcher's records counts neither as a matched nor as a query term for the lexical floors: "
    "'awesome' or 'great' in a chat history are no evidence. It still ranks. 1 turns it off. In [0, 1]."
)
_COMMON_WORD_MIN_RECORDS = (
    "Fewest records the searcher can read before any word is common (gate.common_word_share): in a "
    "small store a share says little. Integer >= 1."
)
_RARE_WORD_RECORDS = (
    "A plain word in at most this many of the searcher's records is evidence alone, as an identifier "
    "is, for gate.lexical_min_matched_terms: 'Where have I camped?' has one content word, and a word "
    "in three records cannot flood the answer (the term fraction still applies). 0 turns it off. "
    "Integer >= 0."
)
_RARE_WORD_MIN_RECORDS = (
    "Fewest records the searcher can read before any word is rare (gate.rare_word_records): in a "
    "store of a hundred facts 'morning' or 'nursing' is in three records and says nothing. Integer >= 1."
)
_CHAT_WORDS = (
    "Words of conversation itself count among the query's terms for the lexical floors but never as "
    "matched, in a store of any size: greetings, interjections, thanks, the adjectives of a reaction "
    "('awesome', 'cool') and the verbs chat wraps around its topic ('sounds', 'looks', 'hear', 'wait'), "
    "with their inflections (retold.retrieve.stopwords.CHAT_WORDS). 'Cool! What did it look like?' "
    "shares three words with a stored turn and is about none. They still rank; a name as written is "
    "never one. false counts them as any word."
)
_DATE_WORDS = (
    "The words of a date the query names ('16', 'June', '2023' of 'on 16 June, 2023') count for the "
    "lexical floors neither as terms nor as matched: the date becomes a time window "
    "(retrieval.time_windows) whose records pass at gate.window_floor, and stored text rarely repeats "
    "the date it happened on. They still rank. false counts them as any word."
)
_CONTEXT = (
    "A candidate of the same-day context pass (retrieval.context_anchors) that clears no other floor "
    "still passes when a survivor shares its event day and its cosine is at least this; it can "
    "enlarge an answer, never make an empty one non-empty. 1 turns it off. In [0, 1]."
)
_COMPANION = (
    "In a search that some candidate already answers (it cleared a step-1 floor), a candidate among the "
    "first gate.companion_rank of the fused ranking that clears no floor still passes when its cosine "
    "is at least this; it can enlarge an answer, never make an empty one non-empty. 1 turns it off. "
    "In [0, 1]."
)
_COMPANION_BESIDE = (
    "The cosine an episodic companion (gate.companion_floor) needs when it entered the ranking beside "
    "the best matches (the same-day context pass or the neighbours) or inside a date window the query "
    "names: its place came from the answer's day or the query's dates, which its own words need not "
    "share (a reply after its question). Other record types keep gate.companion_floor. The lower of "
    "this and gate.companion_floor applies. In [0, 1]."
)
_WINDOW = (
    "A candidate whose event time lies inside a date window the query names (retrieval.time_windows: "
    '"on 4 May", "in October 2023", "last week") passes when its cosine is at least this: the '
    "date is the query's most selective word, and the record that answers a dated question rarely "
    "shares its other words. 1 turns it off. In [0, 1]."
)
_COMPANION_RANK = (
    "How deep in the fused ranking gate.companion_floor reaches (1 = only the top candidate). Integer >= 1."
)
_STANDOUT = (
    "A dense match stands out, and passes, when its cosine is at least this and lies "
    "gate.standout_margin above the mean of the search's other dense matches (fewer than four count "
    "the missing ones as 0): a floor relative to the query's own scores, which holds where an absolute "
    "floor set for one length or phrasing of text does not. 1 turns it off. In [0, 1]."
)
_STANDOUT_MARGIN = (
    "How far above the mean of the search's other dense matches a standout's cosine must lie. In [0, 1]."
)
_SELF_QUESTION_MARGIN = (
    "The standout margin (gate.standout_margin) for a question the searcher asks about themselves "
    '("When did I go to the museum?": a question in the first person singular that addresses no '
    "one, retold.retrieve.query_kind.about_self): memory is where its answer lives, and one about "
    "the user's own past, asked of long records, rarely clears an absolute floor. The lower of "
    "this and gate.standout_margin applies. In [0, 1]."
)
_RELATIVE = (
    "Drops survivors whose fused score is below this fraction of the strongest survivor with the same "
    "number of contributing channels; entity hits are exempt. In [0, 1]."
)


class StatementFloors(_Block):
    """Stricter auto floors for a turn that asks nothing (retold.retrieve.query_kind).

    Calibrated on LoCoMo's tuning half (docs/benchmarks.md): most turns a host searches state
    something and need no memory; raising their floors halves ordinary-turn injection while
    the floors for questions stay where answerable questions need them.
    """

    dense_offset: _Unit = Field(
        0.1,
        description=(
            "Added to every auto dense floor (capped at 1) when no query of the search asks a "
            "question. In [0, 1]."
        ),
    )
    lexical_min_term_fraction: _Unit = Field(
        1.0,
        description=(
            "Fraction of the terms a lexical-only candidate must contain when the search asks "
            "nothing (replaces the auto value). In [0, 1]."
        ),
    )


class AutoGateConfig(_Block):
    """Replaces every gate floor for a host-issued search and excludes source kinds (spec §10.5)."""

    dense_floor: AutoDenseFloors = Field(
        default_factory=AutoDenseFloors, description="Per-type dense floors for host-issued searches."
    )
    lexical_min_term_fraction: _Unit = Field(0.5, description=_LEXICAL_FRACTION)
    lexical_min_matched_terms: _PositiveInt = Field(2, description=_LEXICAL_MATCHED)
    relative_floor: _Unit = Field(0.0, description=_RELATIVE)
    context_floor: _Unit = Field(0.3, description=_CONTEXT)
    companion_floor: _Unit = Field(0.3, description=_COMPANION)
    companion_beside_floor: _Unit = Field(0.3, description=_COMPANION_BESIDE)
    window_floor: _Unit = Field(0.4, description=_WINDOW)
    companion_rank: _PositiveInt = Field(10, description=_COMPANION_RANK)
    standout_floor: _Unit = Field(0.4, description=_STANDOUT)
    standout_margin: _Unit = Field(0.25, description=_STANDOUT_MARGIN)
    self_question_margin: _Unit = Field(0.12, description=_SELF_QUESTION_MARGIN)
    exclude_source_kinds: tuple[SourceKind, ...] = Field(
        ("session_summary",),
        description=(
            "Source kinds rejected before the floors for host-issued searches; generated summaries "
            "are broad and should not arrive unasked."
        ),
    )
    statements: StatementFloors = Field(
        default_factory=StatementFloors,
        description="How the floors above rise for a host-issued search of a turn that asks nothing.",
    )


@dataclass(frozen=True, slots=True)
class GateFloors:
    """The gate settings that apply to one search, whichever trigger issued it.

    Returned by :meth:`GateConfig.floors_for` so the gate never branches on the trigger.
    """

    dense_floor: DenseFloors
    lexical_min_term_fraction: float
    lexical_min_matched_terms: int
    relative_floor: float
    exclude_source_kinds: tuple[SourceKind, ...]
    # "self" for a question about the searcher (tool and auto; a smaller standout margin),
    # else "question" or "statement" for auto floors, which depend on it, and "any" for tool
    query_kind: str = "any"
    context_floor: float = 1.0  # lowest cosine for a context candidate beside a survivor
    companion_floor: float = 1.0  # lowest cosine for a top-ranked candidate of an answered search
    companion_beside_floor: float = 1.0  # the same for one found beside the best or inside the dates
    companion_rank: int = 10  # how deep in the fused ranking companion_floor reaches
    window_floor: float = 1.0  # lowest cosine for a candidate inside the query's date window
    standout_floor: float = 1.0  # lowest cosine for a match that stands out of the search's others
    standout_margin: float = 1.0  # how far above the mean of the other dense matches
    passage_margin: float = 0.0  # how much less a best passage's cosine counts for the floors

    def opened(self) -> GateFloors:
        """Every relevance floor at zero, the source-kind policy kept: a search that asked for no gate."""
        return GateFloors(
            dense_floor=DenseFloors(semantic=0.0, episodic=0.0, procedural=0.0, session_summary=0.0),
            lexical_min_term_fraction=0.0,
            lexical_min_matched_terms=0,  # a match on common words alone too (gate.common_word_share)
            relative_floor=0.0,
            exclude_source_kinds=self.exclude_source_kinds,
            query_kind=self.query_kind,
            context_floor=0.0,
            companion_floor=0.0,
            companion_beside_floor=0.0,
            companion_rank=self.companion_rank,
            window_floor=0.0,
            standout_floor=0.0,
            standout_margin=0.0,
        )

    def for_request(self, gate: bool) -> GateFloors:
        """These floors, or :meth:`opened` ones when the request turned the gate off."""
        return self if gate else self.opened()

    def summary(self) -> dict[str, Any]:
        """The floors as JSON: what a search log row and the gate's view in a trace show."""
        return {
            "dense_floor": self.dense_floor.model_dump(),
            "lexical_min_term_fraction": self.lexical_min_term_fraction,
            "lexical_min_matched_terms": self.lexical_min_matched_terms,
            "relative_floor": self.relative_floor,
            "context_floor": self.context_floor,
            "companion_floor": self.companion_floor,
            "companion_beside_floor": self.companion_beside_floor,
            "companion_rank": self.companion_rank,
            "window_floor": self.window_floor,
            "standout_floor": self.standout_floor,
            "standout_margin": self.standout_margin,
            "passage_margin": self.passage_margin,
            "exclude_source_kinds": list(self.exclude_source_kinds),
            "query_kind": self.query_kind,  # auto floors differ for turns that ask nothing
        }


class GateConfig(_Block):
    """Absolute and relative floors that let a search come back empty (spec §2.3, §10.5)."""

    dense_floor: DenseFloors = Field(
        default_factory=DenseFloors, description="Per-type dense floors for model-issued searches."
    )
    lexical_min_term_fraction: _Unit = Field(0.34, description=_LEXICAL_FRACTION)
    lexical_min_matched_terms: _PositiveInt = Field(2, description=_LEXICAL_MATCHED)
    common_word_share: _Unit = Field(0.08, description=_COMMON_WORD_SHARE)
    common_word_min_records: _PositiveInt = Field(200, description=_COMMON_WORD_MIN_RECORDS)
    rare_word_records: _NonNegativeInt = Field(3, description=_RARE_WORD_RECORDS)
    rare_word_min_records: _PositiveInt = Field(200, description=_RARE_WORD_MIN_RECORDS)
    chat_words: bool = Field(True, strict=True, description=_CHAT_WORDS)
    date_words_uncounted: bool = Field(True, strict=True, description=_DATE_WORDS)
    relative_floor: _Unit = Field(0.0, description=_RELATIVE)
    context_floor: _Unit = Field(0.2, description=_CONTEXT)
    companion_floor: _Unit = Field(0.2, description=_COMPANION)
    companion_beside_floor: _Unit = Field(0.1, description=_COMPANION_BESIDE)
    window_floor: _Unit = Field(0.3, description=_WINDOW)
    companion_rank: _PositiveInt = Field(10, description=_COMPANION_RANK)
    standout_floor: _Unit = Field(0.3, description=_STANDOUT)
    standout_margin: _Unit = Field(0.22, description=_STANDOUT_MARGIN)
    self_question_margin: _Unit = Field(0.12, description=_SELF_QUESTION_MARGIN)
    passage_margin: _Unit = Field(
        0.04,
        description=(
            "How much less a record's best passage cosine (embedding.passage_chars) counts for every "
            "dense floor of both triggers: the best of several short pieces scores higher than one "
            "vector by selection alone. The logged and ranked cosine is unchanged. In [0, 1]."
        ),
    )
    auto: AutoGateConfig = Field(
        default_factory=AutoGateConfig,
        description="Replaces every floor above for host-issued (auto) searches.",
    )

    def floors_for(self, trigger: Trigger, *, asks: bool = True, about_self: bool = False) -> GateFloors:
        """The floors a search issued by ``trigger`` must clear: ``auto`` uses ``gate.auto``,
        raised by ``gate.auto.statements`` when the search asks nothing (``asks`` false); a
        question about the searcher (``about_self``, which implies asking) stands out at
        ``self_question_margin``."""
        if trigger == "auto":
            auto = self.auto
            dense, fraction = auto.dense_floor, auto.lexical_min_term_fraction
            if not asks:
                offset = auto.statements.dense_offset
                dense = AutoDenseFloors(**{t: min(1.0, v + offset) for t, v in dense.model_dump().items()})
                fraction = auto.statements.lexical_min_term_fraction
            return GateFloors(
                dense_floor=dense,
                lexical_min_term_fraction=fraction,
                lexical_min_matched_terms=auto.lexical_min_matched_terms,
                relative_floor=auto.relative_floor,
                exclude_source_kinds=auto.exclude_source_kinds,
                query_kind=("self" if about_self else "question") if asks else "statement",
                context_floor=auto.context_floor,
                companion_floor=auto.companion_floor,
                companion_beside_floor=auto.companion_beside_floor,
                companion_rank=auto.companion_rank,
                window_floor=auto.window_floor if asks else 1.0,
                standout_floor=auto.standout_floor if asks else 1.0,
                standout_margin=_margin(auto.standout_margin, auto.self_question_margin, about_self and asks),
                passage_margin=self.passage_margin,
            )
        if trigger == "tool":
            return GateFloors(
                dense_floor=self.dense_floor,
                lexical_min_term_fraction=self.lexical_min_term_fraction,
                lexical_min_matched_terms=self.lexical_min_matched_terms,
                relative_floor=self.relative_floor,
                exclude_source_kinds=(),
                context_floor=self.context_floor,
                companion_floor=self.companion_floor,
                companion_beside_floor=self.companion_beside_floor,
                companion_rank=self.companion_rank,
                window_floor=self.window_floor,
                standout_floor=self.standout_floor,
                standout_margin=_margin(self.standout_margin, self.self_question_margin, about_self),
                query_kind="self" if about_self else "any",
                passage_margin=self.passage_margin,
            )
        raise ValueError(f"trigger must be 'tool' or 'auto', not {trigger!r}")


def _margin(standout: float, self_question: float, about_self: bool) -> float:
    return min(standout, self_question) if about_self else standout


class FreshnessConfig(_Block):
    """Score decay for episodic records by event age (spec §2.3, §10.4)."""

    episodic_half_life_days: float = Field(
        30.0,
        gt=0,
        strict=True,
        allow_inf_nan=False,
        description=(
            "Halves an episodic record's score for every this many days of event age; semantic and "
            "procedural records do not decay. A number > 0."
        ),
    )
    floor: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        strict=True,
        allow_inf_nan=False,
        description="The lowest decay multiplier, so old episodes fade but never vanish. In (0, 1].",
    )


class RetrievalConfig(_Block):
    """Search: candidate generation, fusion, gate, dedup and the response budget (spec §2.3, §10)."""

    rewrite: RewriteConfig = Field(default_factory=RewriteConfig, description="Hosted query rewriting.")
    trigger: TriggerConfig = Field(default_factory=TriggerConfig, description="Who issues searches.")
    per_generator_k: _PositiveInt = Field(
        30,
        description=(
            "Top records each candidate generator (dense, lexical, entity) hands to fusion; raising it "
            "raises work in every later stage. Integer >= 1."
        ),
    )
    max_alias_tokens: _PositiveInt = Field(
        4,
        description=(
            "Bounds each query-derived entity alias to this many whitespace tokens, so a long pasted "
            "query cannot exhaust SQLite bound parameters. Integer >= 1."
        ),
    )
    entity_max_share: _Unit = Field(
        0.1,
        description=(
            "An entity named in the query selects records only while it is linked to at most "
            "per_generator_k eligible records or this share of them; a broader one (a speaker in every "
            "other turn) is searched as a plain word, with no entity hit and no gate exemption. In [0, 1]."
        ),
    )
    focus_queries: bool = Field(
        True,
        description=(
            "Names of entities too broad to select (entity_max_share) or of the searcher themselves "
            "are left out of the text the dense channel embeds and of the full-text query: they "
            "cannot tell records apart, and in a small embedding model they outweigh the words that "
            "can. The search log records the dense query text. true or false."
        ),
    )
    subject_weight: _Unit = Field(
        0.25,
        description=(
            "Weight in fusion of the similarity lists (dense, context, neighbours) for a record about "
            "someone else than the query names: an 'about' link to an entity of a named entity's kind "
            "and none to a named entity or the searcher (retold.retrieve.subjects); its word and entity "
            "matches count in full. 1 turns the preference off. In [0, 1]."
        ),
    )
    time_windows: bool = Field(
        True,
        description=(
            "A date or period the query names ('on May 8, 2022', 'in October 2023', 'last week', read "
            "against the search's clock) makes the dense channel rank the best records whose event "
            "time falls in it alongside its global best, alternating. No filter: records outside "
            "still rank. true or false."
        ),
    )
    time_window_slack_days: int = Field(
        1,
        ge=0,
        le=31,
        description=(
            "Days added on each side of a named date's window: a turn dated the 5th that says "
            "'yesterday' happened on the 4th. Integer from 0 to 31."
        ),
    )
    context_anchors: int = Field(
        3,
        ge=0,
        le=20,
        description=(
            "Same-day context: the event days of this many best candidates after a first fusion get "
            "a second dense pass, whose best records join fusion as one more list "
            "(retold.retrieve.context). 0 turns it off. Integer from 0 to 20."
        ),
    )
    context_k: int = Field(
        10,
        ge=0,
        le=100,
        description="Records the same-day context pass hands to fusion. Integer from 0 to 100.",
    )
    context_max_records: _PositiveInt = Field(
        300,
        description=(
            "The context pass is skipped when its anchor days hold more eligible records than this: "
            "a day that busy (a bulk import) says nothing about what belongs together, and ranking "
            "it would cost the search more than it gives. The neighbours and the replies are then "
            "read one indexed lookup each, in the order of the writes. Integer >= 1."
        ),
    )
    context_weight: _Unit = Field(
        0.5,
        description=(
            "Weight of the context list in fusion against the dense list: context lifts a record "
            "beside a match without outranking the matches. In [0, 1]."
        ),
    )
    neighbour_anchors: int = Field(
        5,
        ge=0,
        le=50,
        description=(
            "Neighbours: the records written just before and after each of this many best candidates "
            "of the first fusion (same scope, same event day, in event order) join fusion as one more "
            "list, in the order of their anchors: the answer a turn after the question it answers. "
            "0 turns it off. Integer from 0 to 50."
        ),
    )
    neighbour_weight: _Unit = Field(
        0.25,
        description=(
            "Weight of the neighbours list in fusion (the other lists count 1): a neighbour lifts a "
            "record the query also matches, rarely one it does not. In [0, 1]."
        ),
    )
    time_answer_depth: int = Field(
        20,
        ge=0,
        le=100,
        description=(
            "A question that asks for a time ('when...', 'how long...', 'which year...'): of this many "
            "best candidates, those whose text tells a time ('two years ago', 'for a month now', 'last "
            "Friday') join fusion as one more list in their fused order (retold.retrieve.time_answers). "
            "0 turns it off. Integer from 0 to 100."
        ),
    )
    time_answer_weight: _Unit = Field(
        0.5,
        description=(
            "Weight of the time-telling list in fusion (the other lists count 1): it lifts an answer "
            "that says when among candidates the query already matches. In [0, 1]."
        ),
    )
    reply_depth: int = Field(
        20,
        ge=0,
        le=100,
        description=(
            "For a query that asks, this many of the first fusion's best candidates are read for a "
            "question ('How long have you had them?'); the record written just after each, in its "
            "scope and day, is its reply ('For 3 years now!') and joins fusion "
            "(retold.retrieve.replies). 0 turns replies off. Integer from 0 to 100."
        ),
    )
    reply_weight: _Unit = Field(
        0.5,
        description=(
            "Weight of the replies' list in fusion (the other lists count 1), in their askers' "
            "order. In [0, 1]."
        ),
    )
    time_answer_max_share: _Unit = Field(
        0.5,
        description=(
            "No time-telling list when more than this share of the candidates examined tell a time "
            "(stores of long messages, where nearly every record mentions one): a feature most "
            "candidates share does not tell the answer apart. In [0, 1]."
        ),
    )
    time_window_report_days: int = Field(
        14,
        ge=0,
        le=366,
        description=(
            "A past date window also holds the records stored up to this many days after it that "
            "say they are about a time inside it ('last Friday I went to the car show'): events are "
            "told at the next conversation. 0 keeps only records dated inside. Integer from 0 to 366."
        ),
    )
    time_window_max_records: _PositiveInt = Field(
        2000,
        description=(
            "A date window holding more eligible records than this is not preferred (a year over a "
            "large store): no preference at a real cost. Integer >= 1."
        ),
    )
    common_term_min_records: _PositiveInt = Field(
        2000,
        description=(
            "Lexical pruning starts once the searcher's readable scopes hold at least this many indexed "
            "records; below it every query word is searched. Integer >= 1."
        ),
    )
    common_term_share: _Unit = Field(
        0.1,
        description=(
            "With pruning on, a plain query word found in more than this share of those records is left "
            "out of the full-text query: it barely ranks (BM25 IDF at most ln 9 at 10 %) yet would make "
            "the index score every row containing it. It still counts toward gate coverage, dense "
            "retrieval still sees it, identifiers, entity aliases and phrases are always searched, and "
            "when every word is that common the rarest is searched alone. 1 turns pruning off. In [0, 1]."
        ),
    )
    common_term_scan_records: _NonNegativeInt = Field(
        2000,
        description=(
            "When every query word is that common and the rarest is searched alone, SQLite scores only "
            "the newest this many records holding it instead of every one (a word in most of 50K records "
            "cost 50 ms for a list that barely ranks); PostgreSQL reads its postings best first and stays "
            "exact. 0 scores them all. Integer >= 0."
        ),
    )
    rrf_k: _PositiveInt = Field(
        10,
        description=(
            "The fusion constant: each list a record is in adds its weight / (rrf_k + rank). The "
            "spec's 60 lets two middling ranks outvote one channel's best; 10 was measured for MiniLM "
            "on LoCoMo (docs/benchmarks.md). Integer >= 1."
        ),
    )
    similarity_weight: float = Field(
        1.0,
        ge=0.0,
        le=10.0,
        strict=True,
        allow_inf_nan=False,
        description=(
            "How much the similarity lists (the dense channel and the lists drawn from it: context, "
            "neighbours, time answers, replies) count in fusion against the word and entity lists, "
            "which count 1. For MiniLM, 1.5 gains on stores of short chat turns and loses on stores of "
            "long multi-sentence records (docs/decisions.md), so the default counts every list once. "
            "In [0, 10]."
        ),
    )
    default_k: _PositiveInt = Field(
        8, description="Records a search returns when the caller omits SearchRequest.k. Integer >= 1."
    )
    token_budget: _PositiveInt = Field(
        1500,
        description=(
            "Token ceiling on the tool result; filling stops at default_k or this, whichever comes "
            "first. Integer >= 1."
        ),
    )
    dedup_cosine: _Unit = Field(
        0.92, description="Drops a survivor this similar to a record already kept. In [0, 1]."
    )
    gate: GateConfig = Field(default_factory=GateConfig, description="The relevance gate.")
    freshness: FreshnessConfig = Field(default_factory=FreshnessConfig, description="Episodic decay.")
