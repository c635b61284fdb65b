"""Fusion's order properties (issue 46): the channels' best match stays first, and no record is
ranked below one that every list ranks below it, whatever the passes beside the best add
(the same-day context, the neighbours, the replies). The answers that tell a time, judged by
their words, count as a channel here as in fusion."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from retold.models import LexicalMatch
from retold.retrieve.fusion import fuse

from .slow import examples

IDS = [f"r{i}" for i in range(12)]
PROXIMITY = ("context", "neighbours", "replies")


@st.composite
def fusion_inputs(draw: st.DrawFn) -> dict:
    """Three channels' lists and the four passes' lists over a dozen records, any overlap."""

    def ranking(max_size: int = 8) -> list[str]:
        return draw(st.lists(st.sampled_from(IDS), unique=True, max_size=max_size))

    dense = ranking()
    lexical = ranking()
    entity = ranking(4)
    context, neighbours = ranking(), ranking()
    # The time answers are drawn from the candidates, the replies carried as dense hits (the
    # rank stage's own contract): neither brings a record no list has.
    listed = {*dense, *lexical, *entity, *context, *neighbours}
    similar = {*dense, *context, *neighbours}
    return {
        "dense": [(rid, 0.9 - 0.05 * i) for i, rid in enumerate(dense)],
        "lexical": [(rid, 10.0 - i, LexicalMatch(terms=(), total_terms=1)) for i, rid in enumerate(lexical)],
        "entity": [(rid, "e1") for rid in entity],
        "context": [(rid, 0.3) for rid in context],
        "neighbours": [(rid, 0.2) for rid in neighbours],
        "time_answers": [rid for rid in ranking() if rid in listed],
        "replies": [rid for rid in ranking() if rid in similar],
        "other_subject": set(draw(st.lists(st.sampled_from(IDS), unique=True, max_size=3))),
        "weights": draw(st.tuples(*(st.sampled_from([0.25, 0.5, 1.0]) for _ in range(4)))),
    }


def run_fuse(x: dict, with_passes: bool = True) -> list:
    """Fusion as the rank stage runs it: the first fusion's best five bound the passes."""
    channels = fuse(x["dense"], x["lexical"], x["entity"], 60, other_subject=x["other_subject"])
    best = [c.record_id for c in channels[:5]]
    if not with_passes:
        return channels
    cw, nw, tw, rw = x["weights"]
    return fuse(
        x["dense"], x["lexical"], x["entity"], 60,
        context=x["context"], context_weight=cw, neighbours=x["neighbours"], neighbour_weight=nw,
        other_subject=x["other_subject"], time_answers=x["time_answers"], time_answer_weight=tw,
        replies=x["replies"], reply_weight=rw, best=best,
    )  # fmt: skip


def channel_ranks(x: dict, rid: str) -> tuple[float, float, float]:
    """The record's rank in each channel, inf where the channel did not find it."""
    out = []
    for name in ("dense", "lexical", "entity"):
        ids = [hit[0] for hit in x[name]]
        out.append(ids.index(rid) + 1 if rid in ids else math.inf)
    return tuple(out)  # type: ignore[return-value]


@settings(max_examples=examples(400), deadline=None)
@given(fusion_inputs())
def test_a_record_first_in_every_channel_that_found_anything_is_first(x: dict) -> None:
    firsts = {x[name][0][0] for name in ("dense", "lexical", "entity") if x[name]}
    if not firsts:  # no channel found anything: the rank stage runs no pass then
        return
    if x["time_answers"]:  # the answers that tell a time rank as a channel does
        firsts.add(x["time_answers"][0])
    if len(firsts) != 1:
        return
    (top,) = firsts
    if top in x["other_subject"]:  # about someone else: its similarity counts less, by design
        return
    fused = run_fuse(x)
    assert fused[0].record_id == top


@settings(max_examples=examples(400), deadline=None)
@given(fusion_inputs())
def test_no_record_is_ranked_below_one_every_list_ranks_below_it(x: dict) -> None:
    fused = run_fuse(x)
    position = {c.record_id: i for i, c in enumerate(fused)}
    lists = {
        "dense": [h[0] for h in x["dense"]], "lexical": [h[0] for h in x["lexical"]],
        "entity": [h[0] for h in x["entity"]], "context": [h[0] for h in x["context"]],
        "neighbours": [h[0] for h in x["neighbours"]], "time_answers": x["time_answers"],
        "replies": x["replies"],
    }  # fmt: skip

    def rank(name: str, rid: str) -> float:
        return lists[name].index(rid) + 1 if rid in lists[name] else math.inf

    for a in position:
        for b in position:
            if a == b or (a in x["other_subject"]) != (b in x["other_subject"]):
                continue
            ranks_a = [rank(n, a) for n in lists]
            ranks_b = [rank(n, b) for n in lists]
            if all(ra <= rb for ra, rb in zip(ranks_a, ranks_b, strict=True)) and ranks_a != ranks_b:
                assert position[a] < position[b], (a, b, ranks_a, ranks_b)


@settings(max_examples=examples(300), deadline=None)
@given(fusion_inputs())
def test_no_pass_lifts_a_record_above_a_best_match_the_channels_rank_higher(x: dict) -> None:
    best = [c.record_id for c in run_fuse(x, with_passes=False)[:5]]
    fused = run_fuse(x)
    # What the lists that judge a record's words gave it (the channels and the time answers).
    own = {c.record_id: sum(v for k, v in c.contributions.items() if k not in PROXIMITY) for c in fused}
    position = {c.record_id: i for i, c in enumerate(fused)}
    for b in best:
        for c in fused:
            if c.record_id != b and own[c.record_id] < own[b]:
                assert position[b] < position[c.record_id]


@settings(max_examples=examples(300), deadline=None)
@given(fusion_inputs())
def test_contributions_still_add_up_to_the_score(x: dict) -> None:
    for c in run_fuse(x):
        assert math.isclose(sum(c.contributions.values()), c.rrf_score, rel_tol=1e-9, abs_tol=1e-12)
