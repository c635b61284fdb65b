"""Export the packaged all-MiniLM-L6-v2 transformer to ONNX, once, for :class:`OnnxEmbedder`.

The ONNX backend (``retold/index/onnx_embedder.py``) embeds without torch: ONNX Runtime runs
the transformer, ``tokenizers`` tokenises, numpy pools. Only the export needs torch and
transformers, so it happens once per machine, ahead of time, never on a query:

    python -m retold.index.onnx_export              # writes the cache file, prints its path
    python -m retold.index.onnx_export --force      # export again over an existing file

or :func:`export_onnx` from code. The graph maps ``input_ids``, ``attention_mask`` and
``token_type_ids`` (int64, ``[batch, sequence]``, both axes dynamic) to
``last_hidden_state`` (float32, ``[batch, sequence, 384]``); mean pooling and L2
normalisation stay outside it, in numpy, so the file is the plain BERT encoder. It is
written by torch's TorchScript exporter (``dynamo=False``) at opset 17, fp32, no
quantisation: its vectors match sentence-transformers' to a cosine of 0.99999+
(``benchmarks/onnx_embedder.py``).

Where it goes: ``$RETOLD_CACHE_DIR/onnx/<sha256[:16]>/model.onnx``, else
``~/.cache/retold/onnx/<sha256[:16]>/model.onnx``, where ``sha256`` is the pinned digest of
the packaged ``model.safetensors`` (:data:`retold.index.embedder.PACKAGED_SHA256`): other
weights get another folder, never a stale file. Beside it ``manifest.json`` records the
source digest, the ONNX file's own sha256 and the exporting versions; the embedder checks
the file against it before loading, so a file that was cut short or changed is refused
rather than run. The file is written to a temporary name in the same folder and renamed
into place, so a reader never sees half a file, and two concurrent exports leave one whole.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

__all__ = [
    "CACHE_ENV",
    "INPUT_NAMES",
    "MANIFEST_NAME",
    "OPSET",
    "OUTPUT_NAME",
    "cache_root",
    "export_onnx",
    "file_sha256",
    "main",
    "onnx_model_path",
    "read_manifest",
]

CACHE_ENV = "RETOLD_CACHE_DIR"
OPSET = 17
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
MANIFEST_NAME = "manifest.json"
_MODE = 0o644  # a cache file any user may read, as pip's; not os.umask(), which races other threads
_FORMAT = 1  # bump when the graph's inputs or outputs change: a new manifest is then required


def cache_root() -> Path:
    """``$RETOLD_CACHE_DIR`` when set, else ``~/.cache/retold``."""
    raw = os.environ.get(CACHE_ENV, "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "retold"


def onnx_model_path(create: bool = False, *, source_sha256: str | None = None) -> Path:
    """Where the ONNX export of the packaged weights lives (it may not exist yet).

    ``create`` makes the folder. ``source_sha256`` defaults to the pinned packaged digest.
    """
    if source_sha256 is None:
        from retold.index.embedder import PACKAGED_SHA256

        source_sha256 = PACKAGED_SHA256
    folder = cache_root() / "onnx" / source_sha256[:16]
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return folder / "model.onnx"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(model: Path) -> dict[str, Any] | None:
    """The manifest beside ``model``, or None when it is missing or unreadable."""
    try:
        data = json.loads((model.parent / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, _MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_onnx(model_dir: Path, out: Path, *, source_sha256: str | None = None) -> Path:
    """Export the transformer in ``model_dir`` to ``out`` (atomically) and write its manifest.

    ``model_dir`` is a sentence-transformers folder whose transformer sits at its root (the
    packaged all-MiniLM-L6-v2). Needs torch and transformers; takes a few seconds. Returns ``out``.
    ``source_sha256`` is recorded in the manifest (default: the sha256 of its model.safetensors).
    """
    import torch
    from transformers import AutoModel

    model_dir = Path(model_dir)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if source_sha256 is None:
        weights = model_dir / "model.safetensors"
        source_sha256 = file_sha256(weights) if weights.is_file() else "unknown"
    started = time.perf_counter()
    bert = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    bert.eval()

    class _Encoder(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    example = (
        torch.tensor([[101, 7592, 2088, 102], [101, 2088, 102, 0]], dtype=torch.int64),
        torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.int64),
        torch.zeros((2, 4), dtype=torch.int64),
    )
    dynamic = {name: {0: "batch", 1: "sequence"} for name in (*INPUT_NAMES, OUTPUT_NAME)}
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # The legacy exporter's deprecation notice, and tracer notes on the mask code
            # whose branches this model never takes (checked shape by shape by the tests).
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            warnings.filterwarnings("ignore", message=".*aten::index.*")
            torch.onnx.export(
                _Encoder(bert),
                example,
                str(tmp),
                input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME],
                dynamic_axes=dynamic,
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
        os.chmod(tmp, _MODE)  # mkstemp makes it 0600
        digest = file_sha256(tmp)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    import transformers

    manifest = {
        "format": _FORMAT,
        "source_sha256": source_sha256,
        "onnx_sha256": digest,
        "onnx_bytes": out.stat().st_size,
        "opset": OPSET,
        "inputs": list(INPUT_NAMES),
        "output": OUTPUT_NAME,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "export_seconds": round(time.perf_counter() - started, 2),
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _atomic_write_text(out.parent / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m retold.index.onnx_export [--force]``: export the packaged model once."""
    parser = argparse.ArgumentParser(
        prog="python -m retold.index.onnx_export",
        description="Export the packaged all-MiniLM-L6-v2 to ONNX for the torch-free embedder.",
    )
    parser.add_argument("--force", action="store_true", help="export again over an existing file")
    args = parser.parse_args(argv)
    from retold.index.embedder import PACKAGED_SHA256, packaged_model_path

    out = onnx_model_path(create=True)
    manifest = read_manifest(out)
    if (
        not args.force
        and out.is_file()
        and manifest is not None
        and manifest.get("format") == _FORMAT
        and manifest.get("source_sha256") == PACKAGED_SHA256
    ):
        print(f"{out} (already exported; --force to export again)")
        return 0
    started = time.perf_counter()
    export_onnx(packaged_model_path(), out, source_sha256=PACKAGED_SHA256)
    print(f"{out} ({out.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
