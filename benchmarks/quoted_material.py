"""Whose voice a quote is in, on labelled turns: how precise and complete is "own words"?

Each line of a labelled JSON Lines file is one user turn and a quote from it, labelled
``own_words`` (the user speaking) or ``quoted`` (material the user quoted, pasted or
forwarded), with its ``format`` and ``lang`` (``tests/data/README.md``). The figures are for
:func:`retold.ingest.write.voice.read_voice` alone. Two files are read by default:

* ``quoted_material.jsonl``: written before the rules and used to develop them (in-sample);
* ``quoted_material_independent.jsonl``: written independently by someone else.

Precision of "own words" is what matters (a false one is a persistent prompt injection:
quoted text in every later system prompt); recall second (a missed one only keeps a
preference out of the profile). ``tests/unit/test_quoted_material.py`` holds the floors.

    python benchmarks/quoted_material.py                  # both files, per set and per format
    python benchmarks/quoted_material.py FILE ...         # other files
    python benchmarks/quoted_material.py --errors         # list every wrong item too
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from retold.ingest.write.voice import read_voice

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
DEFAULT = (DATA / "quoted_material.jsonl", DATA / "quoted_material_independent.jsonl")


def _ratio(num: int, den: int) -> str:
    return f"{num / den:.3f}" if den else "  -  "


def report(path: Path, *, errors: bool) -> None:
    """Precision and recall of "own words" for the whole file, then per format."""
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tp fp fn tn
    wrong = []
    for item in items:
        voice = read_voice(item["turn"], item["quote"])
        truth = item["label"] == "own_words"
        cell = (0 if truth else 1) if voice.own else (2 if truth else 3)
        for key in ("all", f"format:{item['format']}", f"lang:{item['lang']}"):
            counts[key][cell] += 1
        if cell in (1, 2):
            wrong.append(
                (item["id"], "false own" if cell == 1 else "missed own", item["format"], voice.reason)
            )
    print(f"\n{path.name}: {len(items)} items")
    print(f"  {'':28} {'n':>4} {'own':>4} {'precision':>9} {'recall':>7} {'false own':>9} {'missed':>6}")
    for key in ["all", *sorted(k for k in counts if k != "all")]:
        tp, fp, fn, tn = counts[key]
        n = tp + fp + fn + tn
        precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
        print(f"  {key:28} {n:4d} {tp + fn:4d} {precision:>9} {recall:>7} {fp:9d} {fn:6d}")
    if errors:
        for row in wrong:
            print("  ", *row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--errors", action="store_true", help="list every wrong item")
    args = parser.parse_args()
    for path in args.files or [p for p in DEFAULT if p.exists()]:
        report(path, errors=args.errors)


if __name__ == "__main__":
    main()
