"""Model cards: architecture numbers, parameter counting, KV/state bytes, and their JSON forms.

A card is the architecture of one LLM (its Hugging Face config.json). Counts are exact formulas over the
architecture (no published figure is copied into a computation); the published counts are kept
beside each card only to test against. ``layer_pattern`` repeats over the layers: ``full``
(global attention), ``sliding`` (window ``sliding_window``), ``linear`` (Gated DeltaNet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from opt.common.errors import InputError, UnknownNameError
from opt.common.jsonio import Fields, read_json
from opt.common.units import dtype_bytes

LAYER_TYPES = ("full", "sliding", "linear")
FFN_ACTIVATIONS = ("swiglu", "geglu")


@dataclass(frozen=True)
class MoESpec:
    """Mixture of experts: ``num_experts`` gated FFNs of width ``expert_ffn``, ``top_k`` per token,
    plus ``shared_experts`` always-on FFNs of width ``shared_ffn`` (optionally sigmoid-gated)."""

    num_experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int = 0
    shared_ffn: int = 0
    shared_gate: bool = False
    expert_bias: bool = False


@dataclass(frozen=True)
class LinearAttentionSpec:
    """Gated DeltaNet linear attention (Qwen3-Next): head counts/dims and the causal conv kernel."""

    num_k_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_kernel: int

    @property
    def key_dim(self) -> int:
        return self.num_k_heads * self.head_k_dim

    @property
    def value_dim(self) -> int:
        return self.num_v_heads * self.head_v_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    def state_elements(self) -> int:
        """Recurrent state + conv state elements per sequence for one layer."""
        return (self.num_v_heads * self.head_k_dim * self.head_v_dim
                + (self.conv_kernel - 1) * self.conv_dim)


@dataclass(frozen=True)
class ModelCard:
    """Architecture of one model. Dimensions are counts; ``dtype`` is the parameter precision
    used for byte counts unless an op asks for another (``expert_dtype`` overrides experts)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied_embeddings: bool = False
    ffn_activation: str = "swiglu"
    layer_pattern: tuple[str, ...] = ("full",)
    sliding_window: int | None = None
    moe: MoESpec | None = None
    linear_attention: LinearAttentionSpec | None = None
    attention_output_gate: bool = False
    qk_norm: bool = False
    attention_bias: bool = False
    dtype: str = "bf16"
    expert_dtype: str | None = None
    published_total_params: float | None = None
    published_active_params: float | None = None
    source: str = ""
    notes: str = ""

    # ---- structure ------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """D_q = H·D_h (differs from D for Gemma-3, Qwen3, GPT-OSS, Qwen3-Next)."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def block_period(self) -> int:
        """Layers per partition block = the attention pattern's period (OpWeave L_block)."""
        return len(self.layer_pattern)

    def layer_type(self, layer: int) -> str:
        return self.layer_pattern[layer % len(self.layer_pattern)]

    def layer_types(self) -> list[str]:
        return [self.layer_type(i) for i in range(self.layers)]

    def count_layers(self, kind: str) -> int:
        return sum(1 for t in self.layer_types() if t == kind)

    # ---- parameters -----------------------------------------------------------------------
    def attention_params(self, kind: str) -> int:
        """Parameters of one layer's token mixer (attention or linear attention), norms excluded."""
        d = self.hidden
        if kind == "linear":
            la = self.linear_attention
            if la is None:
                raise InputError(f"card '{self.name}' has linear layers but no linear_attention",
                                 field="linear_attention")
            in_qkvz = d * (2 * la.key_dim + 2 * la.value_dim)
            in_ba = d * 2 * la.num_v_heads
            conv = la.conv_dim * la.conv_kernel
            gates = 2 * la.num_v_heads + la.head_v_dim  # A_log, dt_bias, gated-norm weight
            return in_qkvz + in_ba + conv + gates + la.value_dim * d
        q_out = self.q_dim * (2 if self.attention_output_gate else 1)
        p = d * q_out + 2 * d * self.kv_dim + self.q_dim * d
        if self.attention_bias:
            p += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            p += 2 * self.head_dim
        return p

    def expert_params(self) -> int:
        """Parameters of one routed expert (gate, up, down)."""
        m = self.moe
        p = 3 * self.hidden * m.expert_ffn
        if m.expert_bias:
            p += 2 * m.expert_ffn + self.hidden
        return p

    def ffn_params(self, *, active: bool = False) -> int:
        """One layer's FFN/MoE parameters; ``active`` counts only top-k routed experts."""
        d = self.hidden
        if self.moe is None:
            return 3 * d * self.ffn
        m = self.moe
        n = m.top_k if active else m.num_experts
        p = d * m.num_experts + n * self.expert_params()  # router + experts
        p += m.shared_experts * 3 * d * m.shared_ffn + (d if m.shared_gate else 0)
        return p

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def lm_head_params(self) -> int:
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def params(self, *, active: bool = False) -> int:
        """Total (or active per token) parameter count, embeddings and LM head included."""
        per_layer = sum(self.attention_params(t) + self.ffn_params(active=active)
                        + 2 * self.hidden for t in self.layer_types())
        return per_layer + self.hidden + self.embedding_params() + self.lm_head_params()

    @property
    def total_params(self) -> int:
        return self.params()

    @property
    def active_params(self) -> int:
        return self.params(active=True)

    def active_gemm_params(self) -> int:
        """P_act of OpWeave: parameters every token multiplies through (active params without the
        input embedding gather and the norms); the LM head counts even when tied."""
        return (self.active_params - self.embedding_params() - self.lm_head_params()
                - (2 * self.layers + 1) * self.hidden + self.vocab * self.hidden)

    def weight_bytes(self) -> float:
        """Bytes of all weights at the card's dtype (experts at ``expert_dtype`` when set)."""
        total = self.total_params * dtype_bytes(self.dtype)
        if self.moe is not None and self.expert_dtype is not None:
            n_exp = self.layers * self.moe.num_experts * self.expert_params()
            total += n_exp * (dtype_bytes(self.expert_dtype) - dtype_bytes(self.dtype))
        return total

    # ---- KV cache / recurrent state ---------------------------------------------------------
    def kv_bytes_per_token_layer(self, kv_dtype: str | None = None) -> float:
        """K and V bytes of one token in one attention layer."""
        return 2 * self.kv_dim * dtype_bytes(kv_dtype or self.dtype)

    def kv_bytes_per_token(self, kv_dtype: str | None = None) -> float:
        """Asymptotic KV growth per token of context: full-attention layers only (sliding layers
        stop growing at their window, linear layers hold a fixed state)."""
        return self.count_layers("full") * self.kv_bytes_per_token_layer(kv_dtype)

    def kv_bytes(self, context_tokens, kv_dtype: str | None = None):
        """KV cache + recurrent state bytes of one sequence with ``context_tokens`` tokens
        (vectorised): full layers hold s tokens, sliding ones min(s, window), linear ones their
        fixed state."""
        s = np.asarray(context_tokens, dtype=np.float64)
        per_tok = self.kv_bytes_per_token_layer(kv_dtype)
        total = self.count_layers("full") * s * per_tok
        n_slide = self.count_layers("sliding")
        if n_slide:
            total = total + n_slide * np.minimum(s, self.sliding_window) * per_tok
        n_lin = self.count_layers("linear")
        if n_lin:
            total = total + n_lin * self.linear_attention.state_elements() * dtype_bytes(
                kv_dtype or self.dtype)
        return total

    # ---- JSON ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name, "layers": self.layers, "hidden": self.hidden, "heads": self.heads,
            "kv_heads": self.kv_heads, "head_dim": self.head_dim, "ffn": self.ffn,
            "vocab": self.vocab, "tied_embeddings": self.tied_embeddings,
            "ffn_activation": self.ffn_activation, "layer_pattern": list(self.layer_pattern),
            "sliding_window": self.sliding_window,
            "attention_output_gate": self.attention_output_gate, "qk_norm": self.qk_norm,
            "attention_bias": self.attention_bias, "dtype": self.dtype,
            "expert_dtype": self.expert_dtype,
            "published_total_params": self.published_total_params,
            "published_active_params": self.published_active_params,
            "source": self.source, "notes": self.notes,
        }
        if self.moe is not None:
            d["moe"] = {k: getattr(self.moe, k) for k in MoESpec.__dataclass_fields__}
        if self.linear_attention is not None:
            d["linear_attention"] = {k: getattr(self.linear_attention, k)
                                     for k in LinearAttentionSpec.__dataclass_fields__}
        return d


_CARD_KEYS = set(ModelCard.__dataclass_fields__) | {"moe", "linear_attention"}
#: Largest layer count and dimension a card may declare (per-layer lists are materialised;
#: products of dimensions stay exact in float64).
MAX_LAYERS, MAX_DIM = 10_000, 2 ** 31


def _bounded(f: Fields, key: str, default: Any = ..., *, minimum: int = 1,
             maximum: int = MAX_DIM) -> Any:
    """``f.int(key)`` in [minimum, maximum] (None when optional and absent)."""
    value = f.int(key, minimum=minimum) if default is ... else f.int(key, default,
                                                                     minimum=minimum)
    if value is not None and value > maximum:
        raise f.error(key, f"must be ≤ {maximum:,}, got {value!r}")
    return value


def card_from_dict(obj: Any, source: str | None = None, path: str = "") -> ModelCard:
    """Validate and build a card from its JSON form (errors name the file and field)."""
    f = Fields(obj, source, path)
    f.check_keys(_CARD_KEYS)
    kw: dict[str, Any] = {"name": f.str("name")}
    for key in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab"):
        kw[key] = _bounded(f, key, minimum=1 if key != "ffn" else 0,
                           maximum=MAX_LAYERS if key == "layers" else MAX_DIM)
    if kw["heads"] % kw["kv_heads"]:
        raise f.error("kv_heads", f"heads ({kw['heads']}) must be a multiple of kv_heads "
                                  f"({kw['kv_heads']})")
    for key in ("tied_embeddings", "attention_output_gate", "qk_norm", "attention_bias"):
        kw[key] = f.bool(key, False)
    kw["ffn_activation"] = f.str("ffn_activation", "swiglu")
    if kw["ffn_activation"] not in FFN_ACTIVATIONS:
        raise f.error("ffn_activation", f"unknown activation '{kw['ffn_activation']}'; known: "
                                        f"{', '.join(FFN_ACTIVATIONS)}")
    pattern = f.list("layer_pattern", ["full"])
    for i, t in enumerate(pattern):
        if t not in LAYER_TYPES:
            raise InputError(f"unknown layer type {t!r}; known: {', '.join(LAYER_TYPES)}",
                             source=source, field=f"{f._field('layer_pattern')}[{i}]")
    if not pattern:
        raise f.error("layer_pattern", "must not be empty")
    kw["layer_pattern"] = tuple(pattern)
    kw["sliding_window"] = _bounded(f, "sliding_window", None)
    if "sliding" in pattern and kw["sliding_window"] is None:
        raise f.error("sliding_window", "required when layer_pattern has 'sliding' layers")
    for key in ("dtype", "expert_dtype"):
        value = f.get(key, None)
        if value is not None:
            if not isinstance(value, str):
                raise f.error(key, f"expected a dtype name, got {value!r}")
            try:
                dtype_bytes(value)
            except UnknownNameError as exc:
                raise f.error(key, exc.detail) from None
            kw[key] = value
    m = f.sub("moe", None)
    if m is not None:
        m.check_keys(set(MoESpec.__dataclass_fields__))
        moe = MoESpec(num_experts=_bounded(m, "num_experts"), top_k=_bounded(m, "top_k"),
                      expert_ffn=_bounded(m, "expert_ffn"),
                      shared_experts=_bounded(m, "shared_experts", 0, minimum=0),
                      shared_ffn=_bounded(m, "shared_ffn", 0, minimum=0),
                      shared_gate=m.bool("shared_gate", False),
                      expert_bias=m.bool("expert_bias", False))
        if moe.top_k > moe.num_experts:
            raise m.error("top_k", f"top_k ({moe.top_k}) exceeds num_experts ({moe.num_experts})")
        kw["moe"] = moe
    la = f.sub("linear_attention", None)
    if la is not None:
        la.check_keys(set(LinearAttentionSpec.__dataclass_fields__))
        kw["linear_attention"] = LinearAttentionSpec(
            **{k: _bounded(la, k) for k in LinearAttentionSpec.__dataclass_fields__})
    elif "linear" in pattern:
        raise f.error("linear_attention", "required when layer_pattern has 'linear' layers")
    kw["published_total_params"] = f.num("published_total_params", None)
    kw["published_active_params"] = f.num("published_active_params", None)
    kw["source"] = f.str("source", "")
    kw["notes"] = f.get("notes", "")
    return ModelCard(**kw)


# --------------------------------------------------------------------------------------------
# Hugging Face config.json

_HF_ACTIVATIONS = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu",
                   "gelu_pytorch_tanh": "geglu", "gelu_new": "geglu"}
#: ``model_type`` values of the Hugging Face configs the reader understands.
HF_MODEL_TYPES = ("gemma3", "gemma3_text", "gpt_oss", "llama", "mistral", "mixtral", "qwen",
                  "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next")
#: Keys that mark a JSON object as a Hugging Face config (not a hetopt card).
HF_KEYS = frozenset({"model_type", "architectures", "hidden_size", "num_attention_heads",
                     "num_hidden_layers", "text_config", "_name_or_path", "transformers_version"})
_HF_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding",
                   "linear_attention": "linear"}


def card_from_hf_config(config: Mapping[str, Any] | str | Path, name: str | None = None, *,
                        source: str | None = None) -> ModelCard:
    """Build a card from a Hugging Face-style ``config.json`` (dict or path).

    Understands the ``model_type`` values of :data:`HF_MODEL_TYPES` (Llama/Mistral/Mixtral,
    Qwen 1, 2, 3, 3-MoE, 3-Next, Gemma-3 with ``text_config``, GPT-OSS); any other is an error
    listing them. Qwen1's ``intermediate_size`` is twice the per-projection width and is halved.
    Without an explicit ``head_dim``, ``hidden_size`` must be a multiple of
    ``num_attention_heads``. Every error names the file (``source``, or the path) and field.
    """
    if not isinstance(config, Mapping):
        source = str(config)
        config = read_json(config)
    root = Fields(config, source, "")
    mtype = root.get("model_type", None)
    if mtype not in HF_MODEL_TYPES:
        raise root.error("model_type", f"unsupported model type {mtype!r}; supported: "
                                       f"{', '.join(HF_MODEL_TYPES)}")
    text = root.sub("text_config", None)
    f = text if text is not None else root
    mtype = str(f.obj.get("model_type", mtype))
    hidden = _hf_int(f, "hidden_size")
    heads = _hf_int(f, "num_attention_heads")
    head_dim = f.int("head_dim", None, minimum=1) or f.int("kv_channels", None, minimum=1)
    if head_dim is None:
        if hidden % heads:
            raise f.error("hidden_size", f"{hidden} is not a multiple of num_attention_heads "
                                         f"({heads}) and the config gives no head_dim")
        head_dim = hidden // heads
    ffn = f.int("intermediate_size", minimum=0) or 0
    kw: dict[str, Any] = dict(
        name=name or _hf_name(root, mtype),
        layers=_bounded(f, "num_hidden_layers", maximum=MAX_LAYERS),
        hidden=hidden, heads=heads, kv_heads=f.int("num_key_value_heads", heads, minimum=1),
        head_dim=head_dim, ffn=ffn // 2 if mtype == "qwen" else ffn,
        vocab=f.int("vocab_size", minimum=1),
        tied_embeddings=_hf_bool(f, root, "tie_word_embeddings", mtype.startswith("gemma")),
        ffn_activation=_HF_ACTIVATIONS.get(str(f.obj.get("hidden_act",
                                                         f.obj.get("hidden_activation", "silu"))),
                                           "swiglu"),
        attention_bias=_hf_bool(f, f, "attention_bias", mtype in ("qwen", "qwen2")),
        qk_norm=mtype.startswith(("qwen3", "gemma3")),
        attention_output_gate=mtype == "qwen3_next",
        source=source or "Hugging Face config",
    )
    kw.update(_hf_pattern(f, kw["layers"]))
    moe = _hf_moe(f, ffn, mtype)
    if moe is not None:
        kw["moe"] = moe
    return card_from_dict({k: (v.__dict__ if isinstance(v, (MoESpec, LinearAttentionSpec)) else
                               list(v) if isinstance(v, tuple) else v) for k, v in kw.items()},
                          source=source)


def _hf_int(f: Fields, key: str) -> int:
    """A required integer ≥ 1 of the config."""
    value = f.int(key, minimum=1)
    assert value is not None  # required: Fields.int raised if it was missing
    return value


def _hf_name(root: Fields, mtype: str) -> str:
    raw = root.obj.get("_name_or_path") or mtype
    return str(raw).split("/")[-1].lower() or mtype


def _hf_bool(f: Fields, fallback: Fields, key: str, default: bool) -> bool:
    """A boolean of the config (or of ``fallback``, the root of a ``text_config``)."""
    if key in f.obj:
        return f.bool(key)
    return fallback.bool(key, default)


def _hf_pattern(f: Fields, layers: int) -> dict[str, Any]:
    """``layer_pattern`` and the fields it needs (sliding window, linear attention)."""
    kw: dict[str, Any] = {}
    types = f.get("layer_types", None)
    if isinstance(types, list) and len(types) == layers:
        mapped = [_HF_LAYER_TYPES.get(t) if isinstance(t, str) else None for t in types]
        if None in mapped:
            raise f.error("layer_types", f"unknown layer type {types[mapped.index(None)]!r}; "
                                         f"known: {', '.join(_HF_LAYER_TYPES)}")
        period = next(p for p in range(1, layers + 1)
                      if layers % p == 0 and mapped == mapped[:p] * (layers // p))
        kw["layer_pattern"] = tuple(mapped[:period])
    elif types is not None:
        raise f.error("layer_types", f"expected a list of {layers} layer types")
    elif "sliding_window_pattern" in f.obj:
        p = _bounded(f, "sliding_window_pattern", maximum=MAX_LAYERS)
        kw["layer_pattern"] = tuple(["sliding"] * (p - 1) + ["full"])
    elif "full_attention_interval" in f.obj:
        p = _bounded(f, "full_attention_interval", maximum=MAX_LAYERS)
        kw["layer_pattern"] = tuple(["linear"] * (p - 1) + ["full"])
    if "sliding" in kw.get("layer_pattern", ()):
        kw["sliding_window"] = f.int("sliding_window", minimum=1)
    if "linear" in kw.get("layer_pattern", ()):
        kw["linear_attention"] = LinearAttentionSpec(
            num_k_heads=f.int("linear_num_key_heads", minimum=1),
            num_v_heads=f.int("linear_num_value_heads", minimum=1),
            head_k_dim=f.int("linear_key_head_dim", minimum=1),
            head_v_dim=f.int("linear_value_head_dim", minimum=1),
            conv_kernel=f.int("linear_conv_kernel_dim", minimum=1))
    return kw


def _hf_moe(f: Fields, ffn: int, mtype: str) -> MoESpec | None:
    """The MoE spec of a config with ``num_local_experts`` / ``num_experts`` (None: dense)."""
    key = "num_local_experts" if "num_local_experts" in f.obj else "num_experts"
    n_exp = f.int(key, None, minimum=0)
    if not n_exp:
        return None
    k_key = "num_experts_per_tok" if "num_experts_per_tok" in f.obj else "experts_per_token"
    if k_key not in f.obj:
        raise f.error("num_experts_per_tok", "missing required field for an MoE config")
    shared = f.int("shared_expert_intermediate_size", None, minimum=0) or 0
    return MoESpec(num_experts=n_exp, top_k=f.int(k_key, minimum=1) or 1,
                   expert_ffn=f.int("moe_intermediate_size", None, minimum=1) or ffn,
                   shared_experts=1 if shared else 0, shared_ffn=shared,
                   shared_gate=bool(shared), expert_bias=mtype == "gpt_oss")


# --------------------------------------------------------------------------------------------
# The bundled cards

@dataclass(frozen=True)
class CardSet:
    """Named model cards; names are looked up case-insensitively."""

    cards: Mapping[str, ModelCard] = field(default_factory=dict)

    def __getitem__(self, name: str) -> ModelCard:
        if name in self.cards:
            return self.cards[name]
        for key, card in self.cards.items():
            if key.lower() == name.lower():
                return card
        raise UnknownNameError("model", name, self.cards)

    def __iter__(self):
        return iter(self.cards.values())

    def __len__(self) -> int:
        return len(self.cards)

    def names(self) -> list[str]:
        return list(self.cards)


def cards_from_dict(obj: Any, source: str | None = None) -> CardSet:
    f = Fields(obj, source, "")
    f.check_keys({"schema", "cards"})
    if f.int("schema", 1) != 1:
        raise f.error("schema", f"unsupported schema version {obj.get('schema')!r}; known: 1")
    cards: dict[str, ModelCard] = {}
    for i, c in enumerate(f.list("cards")):
        card = card_from_dict(c, source, f"cards[{i}]")
        if card.name in cards:
            raise InputError(f"duplicate card name '{card.name}'", source=source,
                             field=f"cards[{i}].name")
        cards[card.name] = card
    return CardSet(cards)


def bundled_cards() -> CardSet:
    """Every bundled card (real models and the ``dops-*`` variants)."""
    res = resources.files("opt.costlib.data").joinpath("models.json")
    with resources.as_file(res) as path:
        return cards_from_dict(read_json(path), source=str(path))


def load_cards(path: str | Path | None = None) -> CardSet:
    """Bundled cards plus, when given, a user file: a card set (``{"cards": [...]}``), a single
    card, or a Hugging Face ``config.json`` (recognised by any of :data:`HF_KEYS`)."""
    base = bundled_cards()
    if path is None:
        return base
    obj = read_json(path)
    if isinstance(obj, Mapping) and "cards" in obj:
        extra = cards_from_dict(obj, str(path))
    elif isinstance(obj, Mapping) and HF_KEYS & set(obj):
        card = card_from_hf_config(obj, name=Path(path).parent.name or Path(path).stem,
                                   source=str(path))
        extra = CardSet({card.name: card})
    else:
        card = card_from_dict(obj, str(path))
        extra = CardSet({card.name: card})
    return CardSet({**base.cards, **extra.cards})
