"""Tests for retold.config: spec §2 defaults, ARCHITECTURE §3 overrides, and errors that name the key."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from retold.config import (
    DEFAULT_CONFIG,
    Config,
    DenseFloors,
    GateFloors,
    SourceRank,
    load_config,
)
from retold.errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "retold.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(data: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        Config.from_mapping(data)
    return info.value


# --------------------------------------------------------------------------- defaults


def test_defaults_load_without_a_file() -> None:
    cfg = load_config()

    assert cfg == Config() == DEFAULT_CONFIG
    assert cfg.store.path == "./memory.sqlite"
    assert cfg.store.busy_timeout_seconds == 30
    assert cfg.retrieval.rrf_k == 10  # calibrated for MiniLM on LoCoMo (docs/benchmarks.md)
    assert cfg.retrieval.default_k == 8
    assert cfg.retrieval.token_budget == 1500
    assert cfg.retrieval.per_generator_k == 30
    assert cfg.retrieval.dedup_cosine == 0.92
    assert cfg.retrieval.trigger.mode == "tool_only"
    assert cfg.retrieval.trigger.auto_k == 4
    assert cfg.retrieval.freshness.episodic_half_life_days == 30
    assert cfg.retrieval.freshness.floor == 0.5
    assert cfg.reranker.enabled is False
    assert cfg.reranker.floor is None
    assert cfg.reranker.mode == "rrf_cross_encoder"
    assert cfg.reranker.on_failure == "fallback"
    assert cfg.ingestion.session_idle_timeout_minutes == 30
    assert cfg.ingestion.extraction_timeout_ms == 60000
    assert cfg.ingestion.equivalence.entail_floor == 0.70
    assert cfg.ingestion.evidence.min_words == 3
    assert cfg.sessions.retain_days == 90


def test_architecture_overrides_of_spec_defaults() -> None:
    cfg = DEFAULT_CONFIG

    assert cfg.embedding.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert cfg.embedding.dims == 384
    assert cfg.embedding.version == "1"
    assert cfg.ingestion.equivalence.model == "retold/conservative-judge-v1"
    assert cfg.ingestion.attribute_alias_cosine == 0.6
    assert cfg.retrieval.rewrite.provider == "anthropic"
    assert cfg.ingestion.extraction_provider == "anthropic"
    assert cfg.ingestion.review_provider == "anthropic"
    assert cfg.ingestion.extraction_model == "claude-haiku-4-5-20251001"


def test_gate_defaults() -> None:
    gate = DEFAULT_CONFIG.retrieval.gate

    floors = gate.dense_floor
    # Calibrated for the packaged MiniLM embedder (benchmarks/calibrate_gate.py, docs/benchmarks.md).
    assert (floors.semantic, floors.episodic, floors.procedural, floors.session_summary) == (
        0.33,
        0.575,
        0.45,
        0.675,
    )
    assert (gate.lexical_min_term_fraction, gate.lexical_min_matched_terms, gate.relative_floor) == (
        0.34,
        2,
        0.0,
    )
    auto = gate.auto.dense_floor
    assert (auto.semantic, auto.episodic, auto.procedural, auto.session_summary) == (
        0.38,
        0.625,
        0.55,
        0.625,
    )
    assert gate.auto.lexical_min_term_fraction == 0.5
    assert gate.auto.lexical_min_matched_terms == 2
    assert gate.auto.relative_floor == 0.0
    assert gate.auto.exclude_source_kinds == ("session_summary",)
    assert (gate.context_floor, gate.auto.context_floor) == (0.2, 0.3)
    assert (gate.companion_floor, gate.auto.companion_floor, gate.companion_rank) == (0.2, 0.3, 10)
    assert (gate.companion_beside_floor, gate.auto.companion_beside_floor) == (0.1, 0.3)
    assert (gate.window_floor, gate.auto.window_floor) == (0.3, 0.4)
    assert (gate.standout_floor, gate.standout_margin) == (0.3, 0.22)
    assert (gate.auto.standout_floor, gate.auto.standout_margin) == (0.4, 0.25)
    statements = gate.auto.statements  # chosen on LoCoMo's tuning half (docs/benchmarks.md)
    assert (statements.dense_offset, statements.lexical_min_term_fraction) == (0.1, 1.0)


def test_source_rank_defaults() -> None:
    rank = DEFAULT_CONFIG.policy.source_rank

    assert (
        rank.user_statement,
        rank.system,
        rank.tool_result,
        rank.session_summary,
        rank.agent_inference,
    ) == (4, 3, 2, 2, 1)
    assert rank.rank_of("tool_result") == 2


# --------------------------------------------------------------------------- gate helpers


def test_floors_for_auto_returns_the_auto_floors() -> None:
    gate = DEFAULT_CONFIG.retrieval.gate

    floors = gate.floors_for("auto")

    assert isinstance(floors, GateFloors)
    assert floors.dense_floor == gate.auto.dense_floor
    assert floors.dense_floor.semantic == 0.38
    assert floors.lexical_min_term_fraction == 0.5
    assert floors.lexical_min_matched_terms == 2
    assert floors.relative_floor == 0.0
    assert floors.exclude_source_kinds == ("session_summary",)


def test_floors_for_tool_returns_the_normal_floors_and_excludes_nothing() -> None:
    gate = DEFAULT_CONFIG.retrieval.gate

    floors = gate.floors_for("tool")

    assert floors.dense_floor == gate.dense_floor
    assert floors.lexical_min_term_fraction == 0.34
    assert floors.relative_floor == 0.0
    assert floors.exclude_source_kinds == ()


def test_floors_follow_configured_values() -> None:
    cfg = Config.from_mapping({"retrieval": {"gate": {"auto": {"relative_floor": 0.8}}}})

    assert cfg.retrieval.gate.floors_for("auto").relative_floor == 0.8
    assert cfg.retrieval.gate.floors_for("tool").relative_floor == 0.0


def test_dense_floor_for_record_uses_the_summary_floor_for_session_summaries() -> None:
    floors = DenseFloors()

    assert floors.for_record("semantic") == 0.33
    assert floors.for_record("episodic") == 0.575
    assert floors.for_record("episodic", "session_summary") == 0.675
    assert floors.for_record("procedural", "user_statement") == 0.45
    with pytest.raises(ValueError, match="record type"):
        floors.for_record("opinion")


# --------------------------------------------------------------------------- YAML files


def test_yaml_overrides_nested_keys_and_leaves_the_rest_default(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
store:
  path: /data/agent.sqlite
retrieval:
  default_k: 5
  gate:
    dense_floor:
      episodic: 0.35
    auto:
      exclude_source_kinds: [session_summary, agent_inference]
reranker:
  enabled: true
  floor: 0.2
ingestion:
  extraction_provider: openrouter
""",
    )

    cfg = load_config(path)

    assert cfg.store.path == "/data/agent.sqlite"
    assert cfg.store.busy_timeout_seconds == 30
    assert cfg.retrieval.default_k == 5
    assert cfg.retrieval.gate.dense_floor.episodic == 0.35
    assert cfg.retrieval.gate.dense_floor.semantic == 0.33  # the default, left alone
    assert cfg.retrieval.gate.auto.exclude_source_kinds == ("session_summary", "agent_inference")
    assert cfg.retrieval.gate.auto.relative_floor == 0.0
    assert cfg.retrieval.rrf_k == 10  # calibrated for MiniLM on LoCoMo (docs/benchmarks.md)
    assert cfg.reranker.enabled is True
    assert cfg.reranker.floor == 0.2
    assert cfg.ingestion.extraction_provider == "openrouter"
    assert cfg.ingestion.review_provider == "anthropic"
    assert cfg.embedding == DEFAULT_CONFIG.embedding


def test_load_config_accepts_str_paths(tmp_path: Path) -> None:
    path = write(tmp_path, "sessions:\n  retain_days: 7\n")

    assert load_config(str(path)).sessions.retain_days == 7


@pytest.mark.parametrize("text", ["", "\n# only a comment\n"])
def test_empty_yaml_file_loads_defaults(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text)) == DEFAULT_CONFIG


def test_empty_block_means_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "retrieval:\n  # default_k: 4\nsessions:\n  retain_days: 30\n")

    cfg = load_config(path)

    assert cfg.retrieval == DEFAULT_CONFIG.retrieval
    assert cfg.sessions.retain_days == 30


def test_unquoted_embedding_version_is_a_string(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "embedding:\n  version: 2\n"))

    assert cfg.embedding.version == "2"


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"

    with pytest.raises(ConfigError, match="not found") as info:
        load_config(path)

    assert str(path) in str(info.value)


def test_non_mapping_yaml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "- store\n- embedding\n")

    with pytest.raises(ConfigError, match="mapping") as info:
        load_config(path)

    assert str(path) in str(info.value)


def test_yaml_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "retrieval:\n  default_k: [1, 2\n")

    with pytest.raises(ConfigError, match="not valid YAML") as info:
        load_config(path)

    assert str(path) in str(info.value)


def test_directory_is_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read") as info:
        load_config(tmp_path)

    assert str(tmp_path) in str(info.value)


def test_invalid_value_in_a_file_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "retrieval:\n  gate:\n    relative_floor: 2\n")

    with pytest.raises(ConfigError) as info:
        load_config(path)

    assert info.value.key == "retrieval.gate.relative_floor"
    assert str(path) in str(info.value)
    assert "retrieval.gate.relative_floor" in str(info.value)


# --------------------------------------------------------------------------- unknown keys


def test_top_level_typo_is_an_error_naming_the_key() -> None:
    error = config_error({"retreival": {"default_k": 4}})

    assert error.key == "retreival"
    assert "unknown key 'retreival'" in str(error)
    assert "did you mean 'retrieval'?" in str(error)


def test_nested_typo_names_the_dotted_key_and_suggests_a_fix(tmp_path: Path) -> None:
    path = write(tmp_path, "retrieval:\n  gate:\n    relative_flor: 0.4\n")

    with pytest.raises(ConfigError) as info:
        load_config(path)

    assert info.value.key == "retrieval.gate.relative_flor"
    assert "unknown key 'retrieval.gate.relative_flor' (did you mean 'relative_floor'?)" in str(info.value)


def test_unknown_key_without_a_close_match_has_no_suggestion() -> None:
    error = config_error({"ingestion": {"zzzzzz": 1}})

    assert error.key == "ingestion.zzzzzz"
    assert "did you mean" not in str(error)


def test_non_string_key_is_an_error() -> None:
    error = config_error({"retrieval": {1: 2}})

    assert error.key == "retrieval.1"
    assert "must be a string" in str(error)


def test_from_mapping_rejects_a_non_mapping() -> None:
    error = config_error(["store"])

    assert "mapping" in str(error)


# --------------------------------------------------------------------------- invalid values


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"retrieval": {"gate": {"dense_floor": {"semantic": 1.5}}}}, "retrieval.gate.dense_floor.semantic"),
        (
            {"retrieval": {"gate": {"auto": {"dense_floor": {"episodic": -0.1}}}}},
            "retrieval.gate.auto.dense_floor.episodic",
        ),
        ({"retrieval": {"rrf_k": 0}}, "retrieval.rrf_k"),
        ({"retrieval": {"default_k": -1}}, "retrieval.default_k"),
        ({"retrieval": {"per_generator_k": 2.5}}, "retrieval.per_generator_k"),
        ({"retrieval": {"trigger": {"mode": "sometimes"}}}, "retrieval.trigger.mode"),
        ({"retrieval": {"freshness": {"floor": 0}}}, "retrieval.freshness.floor"),
        ({"retrieval": {"freshness": {"floor": 1.01}}}, "retrieval.freshness.floor"),
        (
            {"retrieval": {"freshness": {"episodic_half_life_days": 0}}},
            "retrieval.freshness.episodic_half_life_days",
        ),
        ({"retrieval": {"rewrite": {"provider": "cohere"}}}, "retrieval.rewrite.provider"),
        (
            {"retrieval": {"gate": {"auto": {"exclude_source_kinds": ["gossip"]}}}},
            "retrieval.gate.auto.exclude_source_kinds",
        ),
        ({"reranker": {"mode": "fancy"}}, "reranker.mode"),
        ({"reranker": {"on_failure": "retry"}}, "reranker.on_failure"),
        ({"reranker": {"enabled": "yes", "floor": 0.2}}, "reranker.enabled"),
        ({"embedding": {"device": "tpu"}}, "embedding.device"),
        ({"embedding": {"dims": "384"}}, "embedding.dims"),
        ({"store": {"busy_timeout_seconds": 0}}, "store.busy_timeout_seconds"),
        ({"ingestion": {"attribute_alias_cosine": 1.2}}, "ingestion.attribute_alias_cosine"),
        (
            {"ingestion": {"equivalence": {"contradict_floor": "high"}}},
            "ingestion.equivalence.contradict_floor",
        ),
        ({"ingestion": {"review_provider": "local"}}, "ingestion.review_provider"),
        ({"sessions": {"retain_days": 0}}, "sessions.retain_days"),
        (
            {
                "policy": {
                    "source_rank": {
                        "user_statement": -1,
                        "system": 3,
                        "tool_result": 2,
                        "session_summary": 2,
                        "agent_inference": 1,
                    }
                }
            },
            "policy.source_rank.user_statement",
        ),
        ({"retrieval": 5}, "retrieval"),
    ],
)
def test_invalid_value_names_the_key(data: dict[str, Any], key: str) -> None:
    error = config_error(data)

    assert error.key == key
    assert key in str(error)


def test_all_errors_are_reported_and_the_first_is_the_key() -> None:
    error = config_error({"retrieval": {"default_k": 0, "token_budget": 0}})

    assert error.key == "retrieval.default_k"
    assert "2 errors" in str(error)
    assert "retrieval.token_budget" in str(error)


def test_every_source_kind_must_be_ranked() -> None:
    error = config_error({"policy": {"source_rank": {"user_statement": 5}}})

    assert error.key == "policy.source_rank.system"
    assert "missing" in str(error)
    assert "policy.source_rank.agent_inference" in str(error)


def test_source_ranks_can_be_replaced_in_full() -> None:
    ranks = {"user_statement": 9, "system": 9, "tool_result": 0, "session_summary": 0, "agent_inference": 0}

    cfg = Config.from_mapping({"policy": {"source_rank": ranks}})

    assert cfg.policy.source_rank == SourceRank(**ranks)


# --------------------------------------------------------------------------- reranker floor


def test_enabled_reranker_without_floor_names_the_floor() -> None:
    error = config_error({"reranker": {"enabled": True}})

    assert error.key == "reranker.floor"
    assert "reranker.floor" in str(error)
    assert "not been calibrated" in str(error)


def test_enabled_reranker_with_floor_loads() -> None:
    cfg = Config.from_mapping({"reranker": {"enabled": True, "floor": 0.2}})

    assert cfg.reranker.enabled is True
    assert cfg.reranker.floor == 0.2


def test_disabled_reranker_needs_no_floor() -> None:
    assert Config.from_mapping({"reranker": {"enabled": False}}).reranker.floor is None


# --------------------------------------------------------------------------- immutability, override


def test_models_are_frozen() -> None:
    cfg = Config()

    with pytest.raises(ValidationError):
        cfg.retrieval.default_k = 4  # type: ignore[misc]
    with pytest.raises(ValidationError):
        cfg.retrieval = cfg.retrieval  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.retrieval.gate.floors_for("tool").relative_floor = 0.1  # type: ignore[misc]
    assert isinstance(cfg.retrieval.gate.auto.exclude_source_kinds, tuple)


def test_override_returns_a_validated_copy() -> None:
    cfg = Config()

    changed = cfg.override(
        {
            "retrieval.default_k": 4,
            "retrieval.gate.auto": {"relative_floor": 0.7},
            "reranker": {"enabled": True, "floor": 0.3},
        }
    )

    assert changed.retrieval.default_k == 4
    assert changed.retrieval.gate.auto.relative_floor == 0.7
    assert changed.retrieval.gate.auto.lexical_min_term_fraction == 0.5  # merged, not replaced
    assert changed.reranker.floor == 0.3
    assert cfg.retrieval.default_k == 8  # the original is untouched
    assert changed.ingestion == cfg.ingestion


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"retrieval.default_k": 0}, "retrieval.default_k"),
        ({"retrieval.gate.relative_flor": 0.4}, "retrieval.gate.relative_flor"),
        ({"retrieval.rrf_k.value": 1}, "retrieval.rrf_k.value"),
        ({"reranker.enabled": True}, "reranker.floor"),
    ],
)
def test_override_is_validated_like_a_file(changes: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        DEFAULT_CONFIG.override(changes)

    assert info.value.key == key


def test_config_error_is_a_value_error() -> None:
    assert isinstance(config_error({"retrieval": {"rrf_k": 0}}), ValueError)


def test_import_is_cheap() -> None:
    code = (
        "import sys, retold.config\n"
        "heavy = {'torch', 'sentence_transformers', 'crewai', 'deepagents'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    root = Path(__file__).resolve().parents[2]  # works whether or not retold is installed

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )

    assert result.stdout.strip() == "[]"
