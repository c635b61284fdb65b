"""The conservative judge's rules: when two parsed claims provably agree, conflict, or support.

Why a module of its own: these are the judge's decisions, stated as named, testable rules
over :class:`~retold.ingest.equivalence.claim_parser.ParsedClaim` values, with no embedder, model or
state. :class:`~retold.ingest.equivalence.conservative.ConservativeJudge` combines them with the
embedder's cosine; keeping them apart lets the rules be read (and changed) without the
caching and threading around them.

* :func:`contradiction_reason` — the reason (``"negation: ..."``, ``"antonyms: ..."``,
  ``"numbers: 3 vs 5"`` ...) two claims about one slot are incompatible, or ``None``;
* :func:`same_reason` — why two claims provably say the same thing, or ``None``;
* :func:`entailment_evidence` — how much of a claim a quote states, and the cap any
  polarity, hedge or missing value puts on its support.

Everything here is deterministic and pure, so safe to call from any thread.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from retold.ingest.equivalence.claim_lexicon import (
    ADDITIVE_NAMES,
    ANTONYMS,
    EVENT,
    GENERIC,
    HAVE,
    NEGATIVE_VALENCE_STEMS,
    RELATIONS,
    SEMI_ADDITIVE,
    SLOT_PREPOSITIONS,
    SPECIFIC_KINDS,
    TOOLS,
    VERBS,
    stem_word,
)
from retold.ingest.equivalence.claim_parser import ParsedClaim, Token

__all__ = ["Entailment", "contradiction_reason", "entailment_evidence", "same_reason"]


# ------------------------------------------------------------------------ contradiction / same


def _subject_end(frame: Sequence[Token], be_at: int | None) -> int:
    """How many leading frame tokens are the subject: up to the first verb, be-verb or preposition."""
    limit = be_at if be_at is not None else len(frame)
    for i, tok in enumerate(frame[:limit]):
        if i == 0:
            continue
        if tok.kind == "prep" or (tok.kind == "word" and tok.canon in VERBS):
            return i
    return limit if be_at is not None else 1


def _span_kind(toks: Sequence[Token]) -> str | None:
    """The value kind of a substituted span, or None when it is not purely a value."""
    kinds = {t.kind for t in toks}
    if not toks or not kinds <= SPECIFIC_KINDS:
        return None
    if kinds == {"date"}:
        return "dates"
    if kinds == {"number"}:
        return "numbers"
    if kinds <= {"number", "date"}:
        return "dates"
    if "ident" in kinds:
        return "identifiers"
    if kinds == {"proper"}:
        return "proper nouns"
    return "values"


def _words(toks: Sequence[Token]) -> str:
    return " ".join(t.surface for t in toks)


def _comparative_pairs(frame: Sequence[Token]) -> list[tuple[str, str]]:
    pairs = []
    for i, tok in enumerate(frame):
        if tok.kind == "prep" and tok.canon == "over" and 0 < i < len(frame) - 1:
            before = next((t for t in reversed(frame[:i]) if t.kind != "prep"), None)
            after = next((t for t in frame[i + 1 :] if t.kind != "prep"), None)
            if before is not None and after is not None:
                pairs.append((before.canon, after.canon))
    return pairs


def _is_rotation(x: Sequence[str], y: Sequence[str]) -> bool:
    if len(x) != len(y) or len(x) < 2:
        return False
    return any(list(x[k:]) + list(x[:k]) == list(y) for k in range(1, len(x)))


def contradiction_reason(pa: ParsedClaim, pb: ParsedClaim) -> str | None:
    """The reason two claims about one slot are incompatible, or None. Never guesses.

    Every difference between the two frames must be explained by a rule, the differing
    slot must not be the subject ("Aditya works at Acme" vs "Priya works at Acme"), and
    verbs under which several values can hold ("speaks", "visited", "has") block the value
    rules, so a second fact about the same person is not read as a conflict.
    """
    fa, fb = pa.frame, pb.frame
    ca, cb = [t.canon for t in fa], [t.canon for t in fb]
    polarity_differs = pa.polarity != pb.polarity
    if pa.past != pb.past:
        return None  # "worked at Acme" and "works at Globex" can both be true

    # Reversed preference: the same words, with X over Y turned into Y over X.
    if sorted(ca) == sorted(cb) and ca != cb:
        pairs_a, pairs_b = _comparative_pairs(fa), _comparative_pairs(fb)
        for x, y in pairs_a:
            if (y, x) in pairs_b and (x, y) not in pairs_b and not polarity_differs:
                return f"reversed preference: {x} over {y} vs {y} over {x}"
        return None

    opcodes = [op for op in difflib.SequenceMatcher(None, ca, cb, autojunk=False).get_opcodes()
               if op[0] != "equal"]  # fmt: skip
    if not opcodes:
        if polarity_differs:
            return _negation_reason(pa, pb)
        return None

    subject_a, subject_b = _subject_end(fa, pa.be_at), _subject_end(fb, pb.be_at)
    antonyms: list[tuple[str, str]] = []
    values: list[tuple[str, str, str]] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag != "replace":
            return None  # a word added or dropped: a different (or narrower) claim
        span_a, span_b = fa[i1:i2], fb[j1:j2]
        before = fa[:i1]
        stems_before = {t.stem for t in before} | {t.canon for t in before}
        canons_a = {t.canon for t in span_a}
        canons_b = {t.canon for t in span_b}
        if (
            len(canons_a) == 1
            and len(canons_b) == 1
            and next(iter(canons_b)) in ANTONYMS.get(next(iter(canons_a)), frozenset())
        ):
            if i1 < subject_a or j1 < subject_b:
                return None  # a modifier of the subject picks out another thing: old/new laptop
            if stems_before & (HAVE | EVENT):
                return None
            antonyms.append((_words(span_a), _words(span_b)))
            continue
        kind = _span_kind(span_a)
        kind_b = _span_kind(span_b)
        if kind is None or kind_b is None:
            copula = _copula_value(pa, pb, i1, j1, span_a, span_b, len(opcodes))
            if copula is None:
                return None
            values.append(("values", _words(span_a), _words(span_b)))
            continue
        if kind != kind_b:
            kind = "values" if {kind, kind_b} != {"numbers", "dates"} else "dates"
        if i1 < subject_a or j1 < subject_b:
            return None  # a different subject: Aditya vs Priya, release 2.4 vs 2.5
        if stems_before & EVENT:
            return None  # visited Japan / visited Peru: both can be true
        if kind in {"dates"} and stems_before & HAVE:
            return None
        if kind not in {"numbers", "dates"}:
            if stems_before & (ADDITIVE_NAMES | HAVE):
                return None
            same_tools = _same_tool_category(span_a, span_b)
            if stems_before & SEMI_ADDITIVE and not same_tools:
                return None  # "uses PostgreSQL" and "uses Redis" can both hold
            slot = (i1 > 0 and fa[i1 - 1].kind == "prep" and fa[i1 - 1].canon in SLOT_PREPOSITIONS) or (
                pa.be_at == i1 and pb.be_at == j1
            )
            if not (slot or same_tools):
                return None  # "works with Dana" / "with Raj", "called Dana" / "called Raj"
        values.append((kind, _words(span_a), _words(span_b)))

    flips = len(antonyms) + (1 if polarity_differs else 0)
    if values:
        if antonyms or polarity_differs or len(values) > 1:
            return None  # several changes at once: not one slot with two values
        kind, x, y = values[0]
        return f"{kind}: {x} vs {y}"
    if antonyms and flips % 2 == 1:
        if polarity_differs:
            return f"antonyms: {antonyms[0][0]} vs {antonyms[0][1]} (with negation)"
        x, y = antonyms[0]
        return f"antonyms: {x} vs {y}"
    return None


def _same_tool_category(span_a: Sequence[Token], span_b: Sequence[Token]) -> bool:
    cats_a = {TOOLS.get(t.surface.lower()) for t in span_a} - {None}
    cats_b = {TOOLS.get(t.surface.lower()) for t in span_b} - {None}
    return bool(cats_a & cats_b)


def _copula_value(
    pa: ParsedClaim,
    pb: ParsedClaim,
    i1: int,
    j1: int,
    span_a: Sequence[Token],
    span_b: Sequence[Token],
    n_diffs: int,
) -> bool | None:
    """``The <attribute> is X`` vs ``The <attribute> is Y``: one slot, two plain-word values.

    Only when the left side names an attribute (``default branch``, ``favorite color``), not
    just an entity (``The user is tired`` / ``is tall`` can both hold) and not a person
    (``the user's wife is a nurse`` / ``is Canadian``), and the value follows the be-verb.
    """
    if n_diffs != 1 or pa.be_at is None or pb.be_at is None:
        return None
    if i1 != pa.be_at or j1 != pb.be_at or pa.be_at != pb.be_at or pa.be_at < 2:
        return None
    left = pa.frame[: pa.be_at]
    if [t.canon for t in left] != [t.canon for t in pb.frame[: pb.be_at]]:
        return None
    if any(t.kind == "prep" for t in left) or left[-1].stem in RELATIONS or left[-1].canon == "user":
        return None
    if left[-1].kind != "word":
        return None
    if any(t.kind == "prep" for t in (*span_a, *span_b)):
        return None
    return True


def _negation_reason(pa: ParsedClaim, pb: ParsedClaim) -> str:
    def show(markers: tuple[str, ...]) -> str:
        return ", ".join(repr(m) for m in markers) or "none"

    valence = [m for m in (*pa.markers, *pb.markers) if stem_word(m) in NEGATIVE_VALENCE_STEMS]
    if valence and len(pa.markers) + len(pb.markers) == 1:
        liked = next(t.surface for t in (pa.frame if pb.markers else pb.frame) if t.canon == "like")
        return f"antonyms: {liked} vs {valence[0]}"
    return f"negation: {show(pa.markers)} vs {show(pb.markers)}"


def same_reason(pa: ParsedClaim, pb: ParsedClaim) -> str | None:
    """Why two claims provably say the same thing, or None.

    The frames (content words and prepositions, after synonyms, stemming and spelling are
    normalised) must be identical, or one must be the other rotated ("Every night the DB is
    refreshed" / "The DB is refreshed every night", "Ben is the user's brother" / "The
    user's brother is Ben"). The cosine guard is applied by the caller.
    """
    if pa.polarity != pb.polarity or pa.past != pb.past:
        return None
    ca = [t.canon for t in pa.frame]
    cb = [t.canon for t in pb.frame]
    if not ca:
        return None
    if ca == cb:
        return "same words after normalisation"
    if _is_rotation(ca, cb):
        return "same words, reordered"
    return None


# ----------------------------------------------------------------------------- entailment


def _covered(tok: Token, premise: ParsedClaim, canons: frozenset[str], request: bool) -> bool:
    """Whether the quote states this claim word.

    ``request`` is true when the quote is a request ("please ...", "can you ...") and the
    claim is about what the user wants: the request shows both the wish and whose it is.
    """
    if tok.canon in canons:
        return True
    if tok.canon == "user" and (premise.principal or request):
        return True
    if tok.canon in {"want", "like"} and request:
        return True
    if tok.kind == "word" and len(tok.canon) >= 5:
        return any(len(c) >= 5 and (c.startswith(tok.canon) or tok.canon.startswith(c)) for c in canons)
    return False


def _weight(tok: Token) -> float:
    if tok.canon in GENERIC:
        return 0.5
    if tok.kind in SPECIFIC_KINDS:
        return 1.5
    return 1.0


@dataclass(frozen=True)
class Entailment:
    """How well a quote supports a claim, before the embedder's cosine is mixed in.

    ``coverage`` is the weighted share of the claim's content words the quote states (0..1),
    ``cap`` the most the final score may be (1.0 unless a rule vetoes), and ``reason`` names
    the rule that set the cap, or ``None``.
    """

    coverage: float
    cap: float
    reason: str | None


def entailment_evidence(premise: ParsedClaim, hypothesis: ParsedClaim) -> Entailment:
    """Content-word coverage of the claim by the quote, plus the caps that veto support."""
    canons = frozenset().union(*(c.canons for c in premise.clauses)) if premise.clauses else frozenset()
    hyp = hypothesis.content
    request = any(c.request for c in premise.clauses) and any(t.canon in {"want", "like"} for t in hyp)
    if not hyp:
        return Entailment(0.0, 0.0, "empty claim")
    total = sum(_weight(t) for t in hyp)
    cap, reason = 1.0, None

    def lower_cap(value: float, why: str) -> None:
        nonlocal cap, reason
        if value < cap:
            cap, reason = value, why

    covered_weight = 0.0
    for tok in hyp:
        direct = _covered(tok, premise, canons, request)
        if direct:
            covered_weight += _weight(tok)
        elif tok.kind in SPECIFIC_KINDS:
            lower_cap(0.45, f"claim adds a value: {tok.surface}")

    # Polarity, clause by clause. For every quote clause that mentions a claim word (or its
    # antonym), each such word must sit under the same negation scope on both sides, after
    # the clause's antonym swaps: "I hate long answers" supports "prefers short answers"
    # (two flips), "I don't use vim anymore" does not support "uses vim" (one flip).
    credited: set[int] = set()
    for index, clause in enumerate(premise.clauses):
        in_clause = [t for t in premise.frame if t.clause == index and t.kind != "prep"]
        pairs: list[tuple[int, Token, Token]] = []  # (claim word position, claim word, quote word)
        swapped: list[int] = []  # claim words this clause states through an antonym
        for position, tok in enumerate(hyp):
            if tok.canon in GENERIC:
                continue
            match = next((p for p in in_clause if p.canon == tok.canon), None)
            if match is None:
                opposite = ANTONYMS.get(tok.canon, frozenset())
                match = next((p for p in in_clause if p.canon in opposite), None)
                if match is None:
                    continue
                swapped.append(position)
            pairs.append((position, tok, match))
        if not pairs:
            continue
        flips = len(swapped) % 2
        disagree = [t for _, t, p in pairs if int(t.negated) ^ int(p.negated) ^ flips]
        if disagree:
            lower_cap(0.1, "quote contradicts the claim on: " + ", ".join(t.surface for t in disagree))
        else:  # an antonym under a negation states the claim word: "not long" covers "short"
            for position in swapped:
                if position not in credited and not _covered(hyp[position], premise, canons, request):
                    covered_weight += _weight(hyp[position])
                    credited.add(position)
        if clause.hedged and not any(c.hedged for c in hypothesis.clauses):
            lower_cap(0.4, "quote is hedged")

    pairs_p, pairs_h = _comparative_pairs(premise.frame), _comparative_pairs(hypothesis.frame)
    if any((y, x) in pairs_p and (x, y) not in pairs_p for x, y in pairs_h):
        lower_cap(0.1, "quote states the reverse preference")
    hyp_canons = {t.canon for t in hypothesis.frame}
    foreign = sorted(premise.relations - hyp_canons - {t.stem for t in hypothesis.frame})
    if foreign and "user" in hyp_canons:
        lower_cap(0.45, f"quote is about the speaker's {foreign[0]}, not the speaker")
    return Entailment(min(1.0, covered_weight / total), cap, reason)
