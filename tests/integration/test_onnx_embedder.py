"""The ONNX Runtime embedder: exported for real into a temporary cache, checked against torch's vectors."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retold.errors import ConfigError
from retold.index.embedder import PACKAGED_SHA256, SentenceTransformerEmbedder, packaged_model_path
from retold.index.lazy_model import ModelLoadError
from retold.index.onnx_embedder import THREADS_ENV, OnnxEmbedder
from retold.index.onnx_export import CACHE_ENV, MANIFEST_NAME, OPSET, export_onnx, onnx_model_path

pytestmark = pytest.mark.integration

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DIMS = 384
TEXTS = [
    "",
    " ",
    "  leading and trailing spaces  ",
    "The user prefers concise answers.",
    "Aditya works at Acme on the billing team.",
    "the deploy failed on friday",
    "naïve café in Zürich, crème brûlée",
    "東京で会議があります。",
    "Привет, как дела?",
    "emoji 😀🚀 and symbols ∑√©",
    "ALL CAPS SHOUTING",
    "https://example.com/a?b=1 user@example.com",
    "x" * 2000,
    "word " * 400,  # past the 256-token limit: truncated the same way
    "Lena prefers Python for scripting and works in the CET timezone. " * 30,
    "ok",
    "\tTabs\nand newlines\n",
    "Marco flew to Lisbon for the Atlas offsite and met Priya there.",
    "What editor does Priya use?",
    "reviewed Omar's pull request on Borealis",
] + [f"memory number {i}: {'details ' * (i % 7)}about project {i % 5}" for i in range(20)]  # > one batch


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private cache holding one real export, made once (it needs torch and takes seconds)."""
    root = tmp_path_factory.mktemp("retold-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(root))
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv(THREADS_ENV, raising=False)
        export_onnx(packaged_model_path(), onnx_model_path(create=True), source_sha256=PACKAGED_SHA256)
        yield root


@pytest.fixture(scope="module")
def torch_embedder() -> SentenceTransformerEmbedder:
    built = SentenceTransformerEmbedder(MODEL, "1", DIMS, device="cpu")
    built.warm()
    return built


@pytest.fixture
def onnx_embedder(cache_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder(MODEL, "1", DIMS)


def test_the_export_lands_in_the_cache_keyed_by_the_pinned_weights(cache_dir: Path) -> None:
    path = onnx_model_path()
    assert path == cache_dir / "onnx" / PACKAGED_SHA256[:16] / "model.onnx"
    assert path.is_file() and path.stat().st_size > 50_000_000  # fp32 weights, not quantised
    assert path.stat().st_mode & stat.S_IRUSR
    manifest = json.loads((path.parent / MANIFEST_NAME).read_text(encoding="utf-8"))
    assert manifest["source_sha256"] == PACKAGED_SHA256 and manifest["opset"] == OPSET
    assert manifest["onnx_bytes"] == path.stat().st_size
    assert sorted(p.name for p in path.parent.iterdir()) == [MANIFEST_NAME, "model.onnx"]  # no temp files


def test_the_cache_defaults_to_the_home_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    expected = tmp_path / ".cache" / "retold" / "onnx" / PACKAGED_SHA256[:16] / "model.onnx"
    assert onnx_model_path() == expected and not expected.parent.exists()
    assert onnx_model_path(create=True) == expected and expected.parent.is_dir()


def test_onnx_vectors_agree_with_torch_vectors(
    onnx_embedder: OnnxEmbedder, torch_embedder: SentenceTransformerEmbedder
) -> None:
    onnx = onnx_embedder.embed_documents(TEXTS)
    reference = torch_embedder.embed_documents(TEXTS)
    assert onnx.shape == (len(TEXTS), DIMS) and onnx.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(onnx, axis=1), 1.0, rtol=1e-5)
    cosines = (onnx * reference).sum(axis=1)
    assert cosines.min() >= 0.999, {TEXTS[i][:40]: float(cosines[i]) for i in np.argsort(cosines)[:3]}
    one_by_one = np.stack([onnx_embedder.embed_documents([t])[0] for t in TEXTS[:5]])
    np.testing.assert_allclose(one_by_one, onnx[:5], atol=1e-5)  # padding and batch order change nothing


def test_the_query_cache_behaves_as_the_torch_embedders(
    cache_dir: Path, torch_embedder: SentenceTransformerEmbedder
) -> None:
    onnx = OnnxEmbedder(MODEL, "1", DIMS, max_chars=50, query_cache_entries=2)
    torch = SentenceTransformerEmbedder(MODEL, "1", DIMS, max_chars=50, query_cache_entries=2)
    torch._model = torch_embedder._model  # the loaded model, shared: no second load
    steps = [
        lambda e: e.embed_queries(["a", "b", "a"]),
        lambda e: e.embed_queries(["b", "c"]),  # evicts "a"
        lambda e: e.embed_queries(["a"]),
        lambda e: e.forget_query("c"),
        lambda e: e.forget_query("c"),
        lambda e: e.embed_queries(["x" * 60, "x" * 50 + "different tail"]),  # one key after the cut
        lambda e: e.clear_cache(),
        lambda e: e.embed_queries([]),
    ]
    for step in steps:
        got, want = step(onnx), step(torch)
        if isinstance(got, np.ndarray):
            assert got.shape == want.shape
            if got.size:
                assert float((got * want).sum(axis=1).min()) >= 0.999
        else:
            assert got == want
        assert onnx.cache_info() == torch.cache_info()
    vector = onnx.embed_queries(["a"])
    vector[0, 0] = 42.0  # a returned copy cannot corrupt the cache
    assert onnx.embed_queries(["a"])[0, 0] != 42.0


def test_the_embedder_loads_lazily_and_reports_its_shape(cache_dir: Path) -> None:
    embedder = OnnxEmbedder("all-MiniLM-L6-v2", "1", DIMS)
    assert not embedder.is_loaded and (embedder.name, embedder.dims, embedder.threads) == (
        "all-MiniLM-L6-v2",
        DIMS,
        1,
    )
    embedder.warm()
    assert embedder.is_loaded and "loaded=True" in repr(embedder)


def test_using_it_in_a_new_process_never_imports_torch(cache_dir: Path) -> None:
    code = (
        "import sys\n"
        "from retold.index.onnx_embedder import OnnxEmbedder\n"
        f"e = OnnxEmbedder({MODEL!r}, '1', {DIMS})\n"
        "v = e.embed_queries(['what does the user prefer?'])\n"
        "assert v.shape == (1, 384), v.shape\n"
        "heavy = sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    env = {**os.environ, CACHE_ENV: str(cache_dir), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr


def test_a_missing_export_names_the_command_that_makes_it(tmp_path: Path) -> None:
    embedder = OnnxEmbedder(MODEL, "1", DIMS, onnx_path=tmp_path / "absent" / "model.onnx")
    with pytest.raises(ModelLoadError, match=r"python -m retold\.index\.onnx_export"):
        embedder.embed_queries(["hello"])
    assert not embedder.is_loaded


def test_a_file_that_differs_from_its_manifest_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"not an onnx file")
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"onnx_sha256": "0" * 64}), encoding="utf-8")
    with pytest.raises(ModelLoadError, match="sha256"):
        OnnxEmbedder(MODEL, "1", DIMS, onnx_path=path).warm()
    (tmp_path / MANIFEST_NAME).unlink()
    with pytest.raises(ModelLoadError, match="manifest"):
        OnnxEmbedder(MODEL, "1", DIMS, onnx_path=path).warm()


def test_an_export_of_other_weights_is_refused(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    path = onnx_model_path(create=True)
    path.write_bytes(b"x")
    (path.parent / MANIFEST_NAME).write_text(json.dumps({"source_sha256": "f" * 64}), encoding="utf-8")
    with pytest.raises(ModelLoadError, match="pinned"):
        OnnxEmbedder(MODEL, "1", DIMS).warm()


def test_settings_it_cannot_serve_are_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="packaged all-MiniLM"):
        OnnxEmbedder("BAAI/bge-small-en-v1.5", "1", DIMS)
    with pytest.raises(ConfigError, match="CPU"):
        OnnxEmbedder(MODEL, "1", DIMS, device="cuda")
    monkeypatch.setenv(THREADS_ENV, "two")
    with pytest.raises(ConfigError, match=THREADS_ENV):
        OnnxEmbedder(MODEL, "1", DIMS)
    monkeypatch.setenv(THREADS_ENV, "2")
    assert OnnxEmbedder(MODEL, "1", DIMS).threads == 2
    assert OnnxEmbedder(MODEL, "1", DIMS, threads=1).threads == 1
