"""An openai-whisper checkpoint (.pt) turned into a CTranslate2 model folder for faster-whisper, with no network.

`ctranslate2.specs.WhisperSpec` is filled straight from the checkpoint's state dict (no transformers), and a
`tokenizer.json` is built with the `tokenizers` library from openai-whisper's bundled tiktoken vocabulary
(`multilingual.tiktoken` or `gpt2.tiktoken`), so token ids are exactly whisper's own. Without `tokenizer.json` in
the folder faster-whisper would go to the Hugging Face hub for one.

The result goes to a folder named after the checkpoint's content hash, written to a temporary folder and renamed
into place, so a conversion is done once and a half-written folder is never used. Blocking and CPU-bound: callers
run it off the event loop (the transcriber's worker thread).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy comes with the model, not with the bot's start
    import numpy as np

# Files faster-whisper needs in a CTranslate2 whisper folder. preprocessor_config.json carries the number of mel bins
# (faster-whisper assumes 80 without it; large-v3 and turbo take 128).
MODEL_FILES = ("model.bin", "config.json", "tokenizer.json", "preprocessor_config.json")


def is_ct2_folder(path: Path) -> bool:
    """True when `path` is a folder holding a CTranslate2 whisper model (model.bin and config.json)."""
    return path.is_dir() and (path / "model.bin").is_file() and (path / "config.json").is_file()


def checkpoint_digest(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256: converted folders are keyed by content, not name."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def converted_folder(checkpoint: Path, cache_root: Path) -> Path:
    """Where `checkpoint` is (or will be) converted under `cache_root`."""
    return cache_root / f"{checkpoint.stem}-{checkpoint_digest(checkpoint)}-ct2"


def convert_checkpoint(checkpoint: Path, cache_root: Path) -> Path:
    """Convert `checkpoint` once into `cache_root`; returns the CTranslate2 folder (reused when already there)."""
    target = converted_folder(checkpoint, cache_root)
    if is_ct2_folder(target) and all((target / name).is_file() for name in MODEL_FILES):
        return target
    shutil.rmtree(target, ignore_errors=True)  # converted by an older agentlab, without the mel size: again
    cache_root.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        write_ct2_folder(checkpoint, partial)
        try:
            partial.rename(target)
        except OSError:  # another process finished first: theirs is as good as ours
            if not is_ct2_folder(target):
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def write_ct2_folder(checkpoint: Path, out_dir: Path) -> None:
    """Write model.bin, config.json and tokenizer.json for `checkpoint` into `out_dir`."""
    import torch

    loaded = torch.load(checkpoint, map_location="cpu", weights_only=True)
    if not isinstance(loaded, dict) or "dims" not in loaded or "model_state_dict" not in loaded:
        raise ValueError("not an openai-whisper checkpoint (no dims and model_state_dict)")
    dims: dict[str, int] = loaded["dims"]
    state = {name: tensor.float().numpy() for name, tensor in loaded["model_state_dict"].items()}
    encoding = whisper_encoding(dims["n_vocab"])
    spec = whisper_spec(dims, state)
    tokens = vocabulary(encoding, dims["n_vocab"])
    spec.register_vocabulary(tokens)
    _set_config(spec.config, encoding, dims)
    spec.validate()
    spec.optimize(quantization="float16")  # the checkpoints are fp16: nothing is lost
    out_dir.mkdir(parents=True, exist_ok=True)
    spec.save(str(out_dir))
    (out_dir / "tokenizer.json").write_text(tokenizer_json(dims["n_vocab"]), encoding="utf-8")
    write_preprocessor_config(out_dir, dims["n_mels"])


def write_preprocessor_config(out_dir: Path, n_mels: int) -> None:
    """The feature size faster-whisper computes its log-mel input with: the checkpoint's own n_mels (80, or 128 for
    large-v3 and turbo). Without the file it feeds 80 bins to a 128-bin model and every note fails."""
    config = {"feature_size": n_mels, "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30, "n_fft": 400}
    (out_dir / "preprocessor_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------------------------
# weights


def whisper_spec(dims: dict[str, int], state: dict[str, np.ndarray]) -> Any:
    """A `WhisperSpec` whose weights are the openai-whisper state dict's (names as in whisper/model.py)."""
    from ctranslate2.specs import WhisperSpec

    spec = WhisperSpec(dims["n_audio_layer"], dims["n_audio_head"], dims["n_text_layer"], dims["n_text_head"])
    encoder, decoder = spec.encoder, spec.decoder
    for name in ("conv1", "conv2"):
        conv = getattr(encoder, name)
        conv.weight, conv.bias = state[f"encoder.{name}.weight"], state[f"encoder.{name}.bias"]
    encoder.position_encodings.encodings = state["encoder.positional_embedding"]
    _layer_norm(encoder.layer_norm, state, "encoder.ln_post")
    for i, layer in enumerate(encoder.layer):
        prefix = f"encoder.blocks.{i}"
        _attention(layer.self_attention, state, f"{prefix}.attn", self_attention=True)
        _layer_norm(layer.self_attention.layer_norm, state, f"{prefix}.attn_ln")
        _ffn(layer.ffn, state, prefix)

    decoder.embeddings.weight = state["decoder.token_embedding.weight"]
    decoder.position_encodings.encodings = state["decoder.positional_embedding"]
    _layer_norm(decoder.layer_norm, state, "decoder.ln")
    decoder.projection.weight = state["decoder.token_embedding.weight"]  # whisper ties the output projection
    for i, layer in enumerate(decoder.layer):
        prefix = f"decoder.blocks.{i}"
        _attention(layer.self_attention, state, f"{prefix}.attn", self_attention=True)
        _layer_norm(layer.self_attention.layer_norm, state, f"{prefix}.attn_ln")
        _attention(layer.attention, state, f"{prefix}.cross_attn", self_attention=False)
        _layer_norm(layer.attention.layer_norm, state, f"{prefix}.cross_attn_ln")
        _ffn(layer.ffn, state, prefix)
    return spec


def _linear(state: dict[str, np.ndarray], prefix: str) -> Any:
    from ctranslate2.specs import common_spec

    linear = common_spec.LinearSpec()
    linear.weight = state[f"{prefix}.weight"]
    if f"{prefix}.bias" in state:
        linear.bias = state[f"{prefix}.bias"]
    return linear


def _attention(spec: Any, state: dict[str, np.ndarray], prefix: str, *, self_attention: bool) -> None:
    from ctranslate2.converters.utils import fuse_linear

    query, key, value = (_linear(state, f"{prefix}.{name}") for name in ("query", "key", "value"))
    if self_attention:
        fuse_linear(spec.linear[0], [query, key, value])
    else:
        fuse_linear(spec.linear[0], [query])
        fuse_linear(spec.linear[1], [key, value])
    out = _linear(state, f"{prefix}.out")
    spec.linear[-1].weight, spec.linear[-1].bias = out.weight, out.bias


def _layer_norm(spec: Any, state: dict[str, np.ndarray], prefix: str) -> None:
    spec.gamma, spec.beta = state[f"{prefix}.weight"], state[f"{prefix}.bias"]


def _ffn(spec: Any, state: dict[str, np.ndarray], prefix: str) -> None:
    for target, name in ((spec.linear_0, "mlp.0"), (spec.linear_1, "mlp.2")):
        source = _linear(state, f"{prefix}.{name}")
        target.weight, target.bias = source.weight, source.bias
    _layer_norm(spec.layer_norm, state, f"{prefix}.mlp_ln")


# --------------------------------------------------------------------------------------------------------------
# vocabulary and tokenizer


def whisper_encoding(n_vocab: int) -> Any:
    """openai-whisper's own tiktoken encoding for a model with `n_vocab` tokens (multilingual or English-only)."""
    from whisper.tokenizer import get_encoding

    multilingual = n_vocab >= 51865
    num_languages = n_vocab - 51765 - int(multilingual)
    return get_encoding("multilingual" if multilingual else "gpt2", num_languages=num_languages)


def _byte_encoder() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (what byte-level BPE vocabularies are written in)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in codes), strict=True))


def _as_text(token: bytes, table: dict[int, str]) -> str:
    # latin-1 turns each byte into the character of the same number, which `translate` maps through the table in C
    # (a join over the bytes took most of the half second that building the tokenizer costs)
    return token.decode("latin-1").translate(table)


def vocabulary(encoding: Any, n_vocab: int) -> list[str]:
    """Every token id's string, in id order: byte-level BPE pieces, then whisper's special tokens."""
    table = _byte_encoder()
    tokens: list[str | None] = [None] * n_vocab
    for piece, rank in encoding._mergeable_ranks.items():
        # multilingual.tiktoken holds one empty piece (id 50256); CTranslate2 wants it empty too (with any other
        # name it takes the model for an English-only one)
        tokens[rank] = _as_text(piece, table)
    for special, rank in encoding._special_tokens.items():
        if rank < n_vocab:
            tokens[rank] = special
    missing = [i for i, token in enumerate(tokens) if token is None]
    if missing:
        raise ValueError(f"the checkpoint's vocabulary has {len(missing)} ids whisper's tokenizer does not know")
    return [token or "" for token in tokens]


@functools.lru_cache(maxsize=2)
def tokenizer_json(n_vocab: int) -> str:
    """tokenizer.json for every checkpoint with `n_vocab` tokens: it depends on the vocabulary alone, and working out
    its merges costs a good part of a second, so a process that converts several checkpoints does it once."""
    return str(build_tokenizer(whisper_encoding(n_vocab)).to_str(pretty=True))


# merges by (vocabulary file, number of pieces): checkpoints for 99 and 100 languages share multilingual.tiktoken.
# Process-wide: a pure function of the vocabulary file (the key)
_MERGES: dict[tuple[str, int], list[tuple[str, str]]] = {}


def bpe_merges(encoding: Any) -> list[tuple[str, str]]:
    """The BPE merges that rebuild every piece of `encoding` in rank order, as `tokenizers` writes them.

    They depend on the byte-pair ranks alone (not on the special tokens), and working them out is most of the cost of
    a tokenizer, so they are worked out once per vocabulary file in a process (a race only does it twice)."""
    ranks: dict[bytes, int] = encoding._mergeable_ranks
    key = (str(encoding.name), len(ranks))
    if key in _MERGES:
        return _MERGES[key]
    table = _byte_encoder()
    merges: list[tuple[int, str, str]] = []
    for piece, rank in ranks.items():
        if len(piece) < 2:
            continue
        splits = [
            (ranks[piece[:i]], ranks[piece[i:]], piece[:i], piece[i:])
            for i in range(1, len(piece))
            if piece[:i] in ranks and piece[i:] in ranks
        ]
        for _, _, left, right in sorted(splits):
            merges.append((rank, _as_text(left, table), _as_text(right, table)))
    merges.sort(key=lambda item: item[0])
    _MERGES[key] = [(left, right) for _, left, right in merges]
    return _MERGES[key]


def build_tokenizer(encoding: Any) -> Any:
    """A `tokenizers.Tokenizer` equal to whisper's tiktoken encoding (same pieces, same ids, same merges)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    table = _byte_encoder()
    ranks: dict[bytes, int] = encoding._mergeable_ranks
    vocab = {_as_text(piece, table): rank for piece, rank in ranks.items() if piece}
    vocab.update(encoding._special_tokens)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=bpe_merges(encoding), fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    # special tokens already in the vocabulary keep their ids when added (`tokenizers` would otherwise number them
    # after the vocabulary, which has a hole: the empty piece, id 50256)
    specials = sorted(encoding._special_tokens.items(), key=lambda item: item[1])
    tokenizer.add_special_tokens([AddedToken(name, special=True, normalized=False) for name, _ in specials])
    wrong = [name for name, rank in specials if tokenizer.token_to_id(name) != rank]
    if wrong:
        raise ValueError(f"tokenizer.json gives {len(wrong)} special tokens ids other than whisper's")
    return tokenizer


def _set_config(config: Any, encoding: Any, dims: dict[str, int]) -> None:
    specials: dict[str, int] = encoding._special_tokens
    eot = specials["<|endoftext|>"]
    config.suppress_ids = []  # faster-whisper passes its own suppress list every call
    config.suppress_ids_begin = [encoding.encode(" ")[0], eot]
    first_language = specials["<|startoftranscript|>"] + 1
    config.lang_ids = [rank for name, rank in specials.items() if first_language <= rank < specials["<|translate|>"]]
    config.lang_ids.sort()
    layers, heads = dims["n_text_layer"], dims["n_text_head"]
    config.alignment_heads = [list(pair) for pair in itertools.product(range(layers // 2, layers), range(heads))]
