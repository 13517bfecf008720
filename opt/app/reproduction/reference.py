"""Published figures that hetopt reproduces (for tests and ``hetopt bench``), with sources.

These are *expectations*, never inputs to a computation.
"""

from __future__ import annotations

#: KV bytes per token of context (bf16, all full-attention layers), KiB — from each model's
#: Hugging Face config.json (2 · layers with full attention · H_kv · D_h · 2 bytes).
KV_KIB_PER_TOKEN = {
    "llama-2-7b": 512, "llama-2-13b": 800, "llama-2-70b": 320, "mixtral-8x7b": 128,
    "qwen3-235b-a22b": 188, "gemma-3-27b": 80, "gpt-oss-120b": 36, "qwen3-next-80b-a3b": 24,
}
#: Qwen3-Next's fixed Gated-DeltaNet state per sequence, elements (its Hugging Face
#: config.json: 36 linear-attention layers, 32 value heads of 128 × 128, conv state).
QWEN3_NEXT_STATE_ELEMENTS = 36 * (32 * 128 * 128 + 3 * 8192)

#: OpWeave §3: (gpu1, gpu2) → (η, (1+√η)/2), two decimals.
OPWEAVE_ETA = {("H100", "L40S"): (1.42, 1.10), ("H100", "A100"): (1.93, 1.19)}

#: Weight blocks at block span 4 (problems.md §1.4): 7 families × ceil(layers / 4).
DOPS_BLOCKS = {"llama-2-7b": 56, "dops-qwen-1.8b": 49, "dops-qwen-14b": 70}
