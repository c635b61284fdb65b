"""Docs stay true to the code: the configuration reference is generated and loads as the defaults."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

from retold.config import Config

ROOT = Path(__file__).parents[2]


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_config_doc", ROOT / "scripts" / "gen_config_doc.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configuration_reference_is_up_to_date() -> None:
    current = (ROOT / "docs" / "configuration.md").read_text()
    assert current == _generator().render(), "run: python scripts/gen_config_doc.py > docs/configuration.md"


def test_configuration_reference_is_the_default_config() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block is not None
    assert Config.from_mapping(yaml.safe_load(block.group(1))) == Config()


def test_readme_opens_with_the_two_commands() -> None:
    """What retold is in two sentences, then the two commands, on the first screen."""
    first_lines = (ROOT / "README.md").read_text().splitlines()[:10]
    assert any(line.startswith("make demo") for line in first_lines)
    assert any(line.startswith("make test") for line in first_lines)
