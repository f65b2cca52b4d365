"""A tiny Qwen2 model written as a GGUF file (random weights, a byte-level vocabulary of 266
tokens): what transformers reads and dequantises like the embedded models, in a second instead
of a minute. For tests of the loading logic; the real models' figures are tested on them."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _byte_symbols() -> list[str]:
    """The byte-level BPE alphabet (GPT-2's mapping of the 256 bytes to printable characters)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            codes.append(256 + extra)
            extra += 1
    return [chr(c) for c in codes]


def write_tiny_qwen2(path: str | Path, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    import gguf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    merges = ["Ġ t", "Ġ a", "h e", "i n", "Ġt he"]
    tokens = _byte_symbols() + [m.replace(" ", "") for m in merges]
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * len(tokens) + [3] * len(special)
    tokens += special
    heads, kv, ff = 4, 2, 2 * hidden
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_block_count(layers)
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 3)
    w.add_pad_token_id(len(tokens) - 3)
    w.add_eos_token_id(len(tokens) - 1)
    w.add_add_bos_token(False)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    w.add_tensor("token_embd.weight", weights(len(tokens), hidden))
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    kv_width = kv * hidden // heads
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(hidden, np.float32))
        for name, rows in (("attn_q", hidden), ("attn_k", kv_width), ("attn_v", kv_width)):
            w.add_tensor(p + name + ".weight", weights(rows, hidden))
            w.add_tensor(p + name + ".bias", weights(rows))
        w.add_tensor(p + "attn_output.weight", weights(hidden, hidden))
        w.add_tensor(p + "ffn_gate.weight", weights(ff, hidden))
        w.add_tensor(p + "ffn_up.weight", weights(ff, hidden))
        w.add_tensor(p + "ffn_down.weight", weights(hidden, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
