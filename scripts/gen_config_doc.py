"""Regenerate docs/configuration.md from retold/config.py.

python scripts/gen_config_doc.py > docs/configuration.md
"""

from __future__ import annotations

import textwrap
from typing import Any

from pydantic import BaseModel

from retold.config import Config


def render() -> str:
    lines: list[str] = []

    def walk(model: BaseModel, indent: int) -> None:
        pad = "  " * indent
        for name, field in type(model).model_fields.items():
            value: Any = getattr(model, name)
            desc = " ".join((field.description or "").split())
            if isinstance(value, BaseModel):
                if desc:
                    lines.append(f"{pad}# {desc}")
                lines.append(f"{pad}{name}:")
                walk(value, indent + 1)
                continue
            lines.extend(f"{pad}# {chunk}" for chunk in textwrap.wrap(desc, 96 - len(pad)))
            if isinstance(value, tuple):
                value = "[" + ", ".join(value) + "]"
            elif value is None:
                value = "null"
            elif isinstance(value, bool):
                value = str(value).lower()
            elif isinstance(value, str) and (value[:1].isdigit() or ":" in value):
                value = f'"{value}"'
            lines.append(f"{pad}{name}: {value}")

    walk(Config(), 0)
    body = "\n".join(lines)
    return HEADER + f"\n```yaml\n{body}\n```\n"


HEADER = """# Configuration

retold reads one YAML file (`retold.open_runtime(path, config="retold.yaml")`,
`retold <command> --config retold.yaml`, or `retold.config.load_config(path)`).
Every key is optional; this is the complete file with every default, generated from
`retold/config.py` (`tests/unit/test_docs.py` checks that it lists every key). A key
that is unknown, mistyped or out of range is an error naming the dotted key, e.g.
`unknown key 'retrieval.gate.relative_flor' (did you mean 'relative_floor'?)`.

Defaults follow the spec (§2) except where ARCHITECTURE §3 changes them: the packaged
offline embedder (`sentence-transformers/all-MiniLM-L6-v2`, 384 dims), the offline
conservative equivalence judge, the added `ingestion.attribute_alias_cosine`, and a
`provider` beside each hosted model, and gate floors calibrated for MiniLM on LoCoMo
(`benchmarks/calibrate_gate.py`) and, for semantic facts, on a hand-labelled store
(`benchmarks/gate_labelled.py`; figures in `docs/benchmarks.md`). Recalibrate them, and
bump `embedding.version`, whenever the embedder changes.

"""

if __name__ == "__main__":
    print(render(), end="")
