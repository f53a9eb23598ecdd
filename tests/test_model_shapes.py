"""The --shapes sweep set: drawn from public model dimensions, reproducible from its seed."""

import math
import statistics

import pytest

from suite.model_shapes import DISTRIBUTION, M_RANGE, MODEL_CONFIGS, input_dims, output_dims, sweep_shapes


def test_the_fused_widths_are_those_of_the_public_configs():
    llama3_8b = MODEL_CONFIGS["llama3-8b"]
    assert (llama3_8b.qkv, llama3_8b.gate_up) == (6144, 28672)  # 4096 + 2 x 8 x 128; 2 x 14336
    assert MODEL_CONFIGS["llama3-70b"].qkv == 10240
    assert MODEL_CONFIGS["qwen2-7b"].qkv == 3584 + 2 * 4 * 128
    assert MODEL_CONFIGS["gemma-7b"].qkv == 16 * 256 * 3  # no grouped KV heads, head_dim 256 != hidden / heads


def test_a_seed_gives_the_same_shapes_and_another_seed_others():
    a = sweep_shapes(1, 48)
    assert a == sweep_shapes(1, 48) and len(set(a)) == 48
    assert sweep_shapes(1, 10) == a[:10]  # a shorter sweep is the start of a longer one
    assert set(a) != set(sweep_shapes(2, 48))


def test_the_draw_does_not_depend_on_the_machine():
    # random.Random(seed) is specified for integer seeds: these are the first shapes of seed 0 everywhere
    assert sweep_shapes(0, 3) == ((2016, 49152, 28672), (1, 22016, 36864), (38, 57344, 14336))


def test_shapes_lie_in_the_documented_distribution():
    ns, ks = set(output_dims()), set(input_dims())
    assert ks < ns  # a projection's input width is another's output width; the fused widths are outputs only
    shapes = sweep_shapes(0, 400)
    assert all(M_RANGE[0] <= m <= M_RANGE[1] and n in ns and k in ks for m, n, k in shapes)
    # log-uniform M: the median of log2(M) near the middle of [0, 13], both ends reached
    logs = [math.log2(m) for m, _, _ in shapes]
    assert 5.0 < statistics.median(logs) < 8.0
    assert min(m for m, _, _ in shapes) <= 4 and max(m for m, _, _ in shapes) >= 4096
    assert all(name in DISTRIBUTION for name in MODEL_CONFIGS)


@pytest.mark.parametrize("count", [0, -1, 1.5, True, 10**12])
def test_a_bad_count_is_refused_naming_the_rule(count):
    with pytest.raises(ValueError, match="--sweep-count must be a whole number"):
        sweep_shapes(0, count)


@pytest.mark.parametrize("seed", [-1, 0.5, None])
def test_a_bad_seed_is_refused_naming_the_rule(seed):
    with pytest.raises(ValueError, match="--sweep-seed must be a whole number"):
        sweep_shapes(seed, 4)
