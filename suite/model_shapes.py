"""GEMM shapes drawn from public model configurations: the ``--shapes sweep`` set.

A transformer layer's projections multiply M tokens by weights whose sides are the model's hidden size, its MLP's
intermediate size, and the fused widths built from them (QKV: hidden + 2 x KV heads x head_dim; gate/up:
2 x intermediate). A projection's K is always the width of what it reads: the hidden size (QKV, O, gate/up) or
the intermediate size (down); its N is any of the four widths. ``sweep_shapes`` draws M log-uniform over 1-8192, N
from every configuration's output widths and K from every configuration's input widths, independently, so that the
set holds the shapes no issue or test names (a Qwen intermediate against a Llama hidden size, a decode M against a
fused width) as well as the usual ones. The draw uses Python's own
``random.Random(seed)``, whose sequence for an integer seed is the same on every machine and Python version.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    """The sizes of one public configuration (its Hugging Face config.json) that set its projection weights."""

    hidden: int  # hidden_size
    intermediate: int  # intermediate_size (per expert for a mixture of experts)
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads
    head_dim: int  # hidden_size / heads unless the config says otherwise

    @property
    def qkv(self) -> int:
        """The fused QKV projection's width: the Q heads plus one K and one V head per KV head."""
        return self.heads * self.head_dim + 2 * self.kv_heads * self.head_dim

    @property
    def gate_up(self) -> int:
        """The fused gate and up projections' width."""
        return 2 * self.intermediate

    def outputs(self) -> tuple[int, ...]:
        """The widths a projection of this model writes (its N): QKV, O and down give hidden, up the intermediate."""
        return tuple(dict.fromkeys((self.hidden, self.intermediate, self.qkv, self.gate_up)))

    def inputs(self) -> tuple[int, ...]:
        """The widths a projection of this model reads (its K)."""
        return (self.hidden, self.intermediate)


MODEL_CONFIGS: dict[str, ModelConfig] = {
    "llama2-7b": ModelConfig(4096, 11008, 32, 32, 128),
    "llama2-13b": ModelConfig(5120, 13824, 40, 40, 128),
    "llama2-70b": ModelConfig(8192, 28672, 64, 8, 128),
    "llama3-8b": ModelConfig(4096, 14336, 32, 8, 128),
    "llama3-70b": ModelConfig(8192, 28672, 64, 8, 128),
    "mistral-7b": ModelConfig(4096, 14336, 32, 8, 128),
    "mixtral-8x7b": ModelConfig(4096, 14336, 32, 8, 128),
    "mixtral-8x22b": ModelConfig(6144, 16384, 48, 8, 128),
    "qwen2-7b": ModelConfig(3584, 18944, 28, 4, 128),
    "qwen2.5-14b": ModelConfig(5120, 13824, 40, 8, 128),
    "qwen2-72b": ModelConfig(8192, 29568, 64, 8, 128),
    "gemma-7b": ModelConfig(3072, 24576, 16, 16, 256),
    "gemma2-9b": ModelConfig(3584, 14336, 16, 8, 256),
    "gemma2-27b": ModelConfig(4608, 36864, 32, 16, 128),
}

M_RANGE = (1, 8192)
DEFAULT_COUNT = 48
DEFAULT_SEED = 0
DISTRIBUTION = (
    f"M log-uniform over {M_RANGE[0]}-{M_RANGE[1]} (rounded to the nearest integer); N uniform over the projection "
    "output widths (hidden, intermediate, fused QKV, fused gate/up) and K uniform over the input widths (hidden, "
    "intermediate), drawn independently, of " + ", ".join(MODEL_CONFIGS) + "; random.Random(seed), distinct shapes"
)


def output_dims() -> tuple[int, ...]:
    """Every projection output width (N) of every configuration, sorted, without repeats."""
    return tuple(sorted({d for c in MODEL_CONFIGS.values() for d in c.outputs()}))


def input_dims() -> tuple[int, ...]:
    """Every projection input width (K) of every configuration, sorted, without repeats."""
    return tuple(sorted({d for c in MODEL_CONFIGS.values() for d in c.inputs()}))


def sweep_shapes(seed: int = DEFAULT_SEED, count: int = DEFAULT_COUNT) -> tuple[tuple[int, int, int], ...]:
    """``count`` distinct (M, N, K) shapes drawn with ``seed`` (see ``DISTRIBUTION``); the same on every machine.
    Raises ValueError when count is not a whole number from 1 to the number of distinct shapes there can be."""
    ns, ks = output_dims(), input_dims()
    room = (M_RANGE[1] - M_RANGE[0] + 1) * len(ns) * len(ks)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= room:
        raise ValueError(f"--sweep-count must be a whole number from 1 to {room}, not {count!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"--sweep-seed must be a whole number >= 0, not {seed!r}")
    rng = random.Random(seed)
    lo, hi = math.log(M_RANGE[0]), math.log(M_RANGE[1])
    shapes: dict[tuple[int, int, int], None] = {}
    while len(shapes) < count:
        m = min(max(round(math.exp(rng.uniform(lo, hi))), M_RANGE[0]), M_RANGE[1])
        shapes[(m, rng.choice(ns), rng.choice(ks))] = None
    return tuple(shapes)
