"""The local models' runtimes: torch, onnx-fp32 and onnx-int8 give the same vectors
(cosine >= 0.99 on 1,000 LoCoMo turns) and the same windows, for all-MiniLM-L6-v2 and
all-mpnet-base-v2; a process that embeds queries on an ONNX runtime never imports
torch; the export runs once, under a lock, and leaves nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from memories.providers import onnx_export
from memories.providers.embeddings import EmbeddingError, LocalEmbeddingProvider
from memories.providers.model_files import LOCAL_MODELS, MPNET

BASE_DIR = Path(settings.BASE_DIR)
LOCOMO = BASE_DIR.parent / "shared" / "data" / "locomo-dev.json"
TURNS = 1000
ONNX_RUNTIMES = ["onnx-fp32", "onnx-int8"]


def local(
    runtime: str, model: str = "all-MiniLM-L6-v2", *, window_tokens: int | None = None
) -> LocalEmbeddingProvider:
    config = settings.EMBEDDING
    window_tokens = config["WINDOW_TOKENS"] if window_tokens is None else window_tokens
    return LocalEmbeddingProvider(
        model, LOCAL_MODELS[model].dimension, config["BATCH_SIZE"], 0,
        window_tokens=window_tokens, window_overlap=config["WINDOW_OVERLAP"], runtime=runtime,
    )  # fmt: skip


@pytest.fixture(scope="module")
def torch_provider() -> LocalEmbeddingProvider:
    return local("torch")


@pytest.fixture(scope="module", params=ONNX_RUNTIMES)
def onnx_provider(request: pytest.FixtureRequest) -> LocalEmbeddingProvider:
    return local(request.param)


@pytest.fixture(scope="module")
def locomo_turns() -> list[str]:
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo is not at {LOCOMO} (the parity test reads 1,000 of its turns)")
    sys.path.insert(0, str(BASE_DIR))
    from bench.locomo import locomo_dataset

    dataset = locomo_dataset(LOCOMO)
    turns = [message.content for dialogue in dataset.dialogues for message in dialogue.messages]
    assert len(turns) >= TURNS
    return turns[:TURNS]


@pytest.fixture(scope="module")
def torch_vectors(torch_provider: LocalEmbeddingProvider, locomo_turns: list[str]) -> np.ndarray:
    return torch_provider.embed(locomo_turns)


def test_onnx_vectors_are_torchs(onnx_provider, locomo_turns, torch_vectors):
    """Every turn's vector within 0.99 cosine of torch's: one embedding space for all."""
    vectors = onnx_provider.embed(locomo_turns)
    assert vectors.shape == torch_vectors.shape and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    cosines = (vectors * torch_vectors).sum(axis=1)
    print(
        f"\n{onnx_provider.runtime} vs torch on {len(cosines)} LoCoMo turns: "
        f"min cosine {cosines.min():.4f}, mean {cosines.mean():.4f}"
    )
    assert cosines.min() >= 0.99, locomo_turns[int(cosines.argmin())]


def test_one_text_or_a_batch_gives_the_same_vector(onnx_provider, locomo_turns):
    """A query embedded alone matches the same text embedded in a padded batch (int8
    only nearly: the quantized attention projections take one activation scale per
    batch, so a text's neighbours in its batch move its vector a little)."""
    batch = onnx_provider.embed(locomo_turns[:20])
    alone = np.stack([onnx_provider.embed([text])[0] for text in locomo_turns[:20:5]])
    cosines = (alone * batch[::5]).sum(axis=1)
    assert cosines.min() >= (0.99 if onnx_provider.runtime == "onnx-int8" else 0.99999)


def test_the_windows_are_the_same_word_pieces(torch_provider, onnx_provider):
    texts = [
        " ".join(f"word{n} and more" for n in range(400)),
        "Ünïcödé 日本語 and an emoji 🎉, " * 60,
        "  spaces  before and after  " * 90,
        "a short text",
    ]
    for text in texts:
        assert onnx_provider.windows(text) == torch_provider.windows(text)
    assert len(onnx_provider.windows(texts[0])) > 1
    tokenizer = onnx_provider.load().tokenizer  # as tests and bench/long_memories.py use it
    assert tokenizer("Hello there", add_special_tokens=False)["input_ids"] == [7592, 2045]


def test_fewer_threads_give_the_same_vectors(onnx_provider):
    before = onnx_provider.embed(["what did Melanie paint last year?"])
    onnx_provider.threads_set(1)
    try:
        after = onnx_provider.embed(["what did Melanie paint last year?"])
    finally:
        onnx_provider.threads_set(2)
    assert np.allclose(before, after, atol=1e-5)


def test_an_unknown_runtime_is_refused_for_good():
    with pytest.raises(EmbeddingError, match="EMBEDDING_RUNTIME") as error:
        local("onnx-fp16").embed(["x"])
    assert error.value.retryable is False


QUERY_PROCESS = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "memoryhub.settings"
import django
django.setup()
from memories.providers.embeddings import get_provider, query_cache, web_process_tune
web_process_tune()  # as memoryhub.wsgi does
provider = get_provider()
vector = query_cache.submit(provider, "where did Caroline go last week?").result()
# the session the first query made is the web's: one thread (no second session later)
session = provider.load()._session
print(session.get_session_options().intra_op_num_threads, provider.batch_size)
windows = provider.windows(" ".join(f"word{n}" for n in range(600)))
print(provider.runtime, vector.shape[0], len(windows) > 1,
      [name for name in ("torch", "sentence_transformers", "transformers") if name in sys.modules])
"""


@pytest.mark.parametrize("runtime", ONNX_RUNTIMES)
def test_a_process_embedding_queries_on_onnx_never_imports_torch(runtime):
    onnx_export.onnx_ensure(folder=onnx_export.onnx_folder(settings.DATA_DIR))
    done = subprocess.run(
        [sys.executable, "-c", QUERY_PROCESS],
        cwd=BASE_DIR, capture_output=True, text=True, timeout=120,
        env={**os.environ, "EMBEDDING_PROVIDER": "local",
             "EMBEDDING_RUNTIME": runtime, "MEMORYHUB_DATA_DIR": str(settings.DATA_DIR)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.split("\n")
    assert lines[-3] == "1 4"  # EMBEDDING_QUERY_TORCH_THREADS, EMBEDDING_QUERY_BATCH_SIZE
    assert lines[-2] == f"{runtime} 384 True []"


# --- all-mpnet-base-v2: 768 dimensions, 384 word pieces, its own tokenizer ----------


@pytest.fixture(scope="module")
def mpnet_torch_provider() -> LocalEmbeddingProvider:
    return local("torch", MPNET)


@pytest.fixture(scope="module", params=ONNX_RUNTIMES)
def mpnet_onnx_provider(request: pytest.FixtureRequest) -> LocalEmbeddingProvider:
    return local(request.param, MPNET)  # exported once per data folder (about 45 s)


@pytest.fixture(scope="module")
def mpnet_torch_vectors(
    mpnet_torch_provider: LocalEmbeddingProvider, locomo_turns: list[str]
) -> np.ndarray:
    return mpnet_torch_provider.embed(locomo_turns)  # a minute or two on 2 cores


def test_mpnet_onnx_vectors_are_torchs(mpnet_onnx_provider, locomo_turns, mpnet_torch_vectors):
    vectors = mpnet_onnx_provider.embed(locomo_turns)
    assert vectors.shape == (TURNS, 768) == mpnet_torch_vectors.shape
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    cosines = (vectors * mpnet_torch_vectors).sum(axis=1)
    print(
        f"\nmpnet {mpnet_onnx_provider.runtime} vs torch on {len(cosines)} LoCoMo turns: "
        f"min cosine {cosines.min():.4f}, mean {cosines.mean():.4f}"
    )
    assert cosines.min() >= 0.99, locomo_turns[int(cosines.argmin())]


def test_mpnet_windows_are_its_own_384_word_pieces(mpnet_torch_provider, mpnet_onnx_provider):
    texts = [
        " ".join(f"word{n} and more" for n in range(400)),
        "Ünïcödé 日本語 and an emoji 🎉, " * 60,
        "a short text",
    ]
    for text in texts:
        assert mpnet_onnx_provider.windows(text) == mpnet_torch_provider.windows(text)
    runtime = mpnet_onnx_provider.load()
    assert (runtime.dimension, runtime.max_seq_length) == (768, 384)
    tokenizer = runtime.tokenizer  # type: ignore[attr-defined]
    assert tokenizer("Hello there", add_special_tokens=False)["input_ids"] == [7596, 2049]
    whole_model = local(mpnet_onnx_provider.runtime, MPNET, window_tokens=0)
    windows = whole_model.windows(texts[0])
    pieces = [len(runtime.offsets(texts[0][start:end])) for start, end in windows]
    assert len(windows) > 1 and pieces[0] == 382  # 384 less its two markers
    assert max(pieces) <= 382


# --- the export: once, under a lock, all or nothing (the heavy steps replaced) ---------


@pytest.fixture
def fake_steps(monkeypatch):
    """The export's steps as instant fakes that write small files; counts the exports."""
    exports = []

    class Model:
        class config:  # noqa: N801 - as a transformers config
            hidden_size = 384

    def transformer_load(model, data_dir):
        exports.append(time.monotonic())
        time.sleep(0.3)  # long enough for a second exporter to arrive meanwhile
        return Model()

    monkeypatch.setattr(onnx_export, "_transformer_load", transformer_load)
    monkeypatch.setattr(onnx_export, "_float_export", lambda model, path: path.write_bytes(b"f"))
    monkeypatch.setattr(
        onnx_export, "_int8_quantize", lambda src, dst, model: dst.write_bytes(b"q")
    )
    monkeypatch.setattr(
        onnx_export, "_parity_check", lambda module, graphs, **kw: dict.fromkeys(graphs, 1.0)
    )
    return exports


def test_processes_starting_together_export_once(tmp_path, fake_steps):
    folder = tmp_path / "models" / "all-MiniLM-L6-v2"
    manifests = []
    threads = [
        threading.Thread(target=lambda: manifests.append(onnx_export.onnx_export(folder=folder)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fake_steps) == 1
    assert len(manifests) == 3 and all(m == manifests[0] for m in manifests)
    assert sorted(p.name for p in folder.iterdir()) == [
        "export.lock", "manifest.json", "model-fp32.onnx", "model-int8.onnx"
    ]  # fmt: skip
    assert onnx_export.manifest_read(folder) == manifests[0]


def test_a_failed_export_leaves_no_graph_and_no_manifest(tmp_path, fake_steps, monkeypatch):
    def disagree(module, graphs, **kw):
        raise onnx_export.ExportError("onnx-int8: cosine 0.5 to torch's vectors")

    monkeypatch.setattr(onnx_export, "_parity_check", disagree)
    folder = tmp_path / "graphs"
    with pytest.raises(onnx_export.ExportError):
        onnx_export.onnx_export(folder=folder)
    assert [p.name for p in folder.iterdir()] == ["export.lock"]
    assert onnx_export.manifest_read(folder) is None


def test_graphs_of_an_older_recipe_are_exported_again(tmp_path, fake_steps, monkeypatch):
    folder = tmp_path / "graphs"
    onnx_export.onnx_export(folder=folder)
    onnx_export.onnx_export(folder=folder)
    assert len(fake_steps) == 1  # current: kept
    monkeypatch.setattr(onnx_export, "RECIPE", onnx_export.RECIPE + 1)
    assert onnx_export.manifest_read(folder) is None
    manifest = onnx_export.onnx_export(folder=folder)
    assert len(fake_steps) == 2
    assert json.loads((folder / "manifest.json").read_text()) == manifest


def test_an_unknown_runtime_is_a_system_check_error(settings):
    from memories.checks import embedding_runtime

    settings.EMBEDDING = {**settings.EMBEDDING, "PROVIDER": "local", "RUNTIME": "onnx"}
    assert [message.id for message in embedding_runtime()] == ["memories.E001"]
    settings.EMBEDDING = {**settings.EMBEDDING, "RUNTIME": "onnx-int8"}
    assert embedding_runtime() == []


def test_the_command_exports_then_keeps_a_current_export(tmp_path, fake_steps, settings):
    from io import StringIO

    from django.core.management import call_command

    settings.DATA_DIR = tmp_path
    outputs = [StringIO() for _ in range(3)]
    call_command("export_onnx", stdout=outputs[0])
    call_command("export_onnx", stdout=outputs[1])
    assert len(fake_steps) == 1
    call_command("export_onnx", "--force", stdout=outputs[2])
    assert len(fake_steps) == 2
    assert all("Exported all-MiniLM-L6-v2 to" in outputs[n].getvalue() for n in (0, 2))
    assert "are current" in outputs[1].getvalue()
    assert (tmp_path / "models" / "all-MiniLM-L6-v2" / "model-int8.onnx").is_file()


def test_the_command_exports_mpnet_into_its_own_folder(tmp_path, fake_steps, settings):
    from io import StringIO

    from django.core.management import call_command

    from memories.providers.model_files import model_folder

    weights = model_folder(MPNET)  # the test data folder's, assembled once
    (tmp_path / "models" / MPNET).mkdir(parents=True)
    (tmp_path / "models" / MPNET / "weights").symlink_to(weights)
    settings.DATA_DIR = tmp_path
    output = StringIO()
    call_command("export_onnx", "--model", MPNET, stdout=output)
    assert f"Exported {MPNET} to {tmp_path / 'models' / MPNET}" in output.getvalue()
    manifest = onnx_export.manifest_read(tmp_path / "models" / MPNET, MPNET, tmp_path)
    assert manifest is not None and manifest["source"]["model"] == MPNET
    assert manifest["source"]["weights_sha256"].startswith("78c0197b")
    assert len(fake_steps) == 1 and not (tmp_path / "models" / "all-MiniLM-L6-v2").exists()
