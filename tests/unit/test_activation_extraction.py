"""Activation after an extraction run (spec §8.2): the same policy as a tool write, after the commit."""

from __future__ import annotations

from typing import Any

from .extraction_world import cand, make_xworld


async def test_an_extracted_standing_preference_enters_the_profile_and_a_one_off_does_not(
    store_location: Any,
) -> None:
    world = await make_xworld(store_location("x.sqlite"))
    try:
        standing = await world.say("user", "Please always answer me in French.")
        one_off = await world.say("user", "Keep this one short, I'm in a hurry.")
        world.propose(
            cand("Prefers answers in French", "Please always answer me in French.", standing,
                 attribute="answer_language"),
            cand("Always wants short answers", "Keep this one short", one_off, attribute="answer_length"),
        )  # fmt: skip
        await world.end()
        result = await world.extract()
        assert result.status == "extracted", result
        profile = await world.rt.profile(world.p)
        assert "> Prefers answers in French" in profile
        assert "short answers" not in profile  # a one-off request, paraphrased as a standing one
        decided = await world.events("record.activation_decided")
        assert [e["payload"]["activation"] for e in decided] == ["ambient"]
        summary = [r for r in await world.records() if r.type == "episodic"]
        assert summary and not await world.rt.store.activation_of([r.id for r in summary])
    finally:
        await world.rt.close()
