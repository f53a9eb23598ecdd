"""Time the Triton attention kernel (suite/triton/attention.py, pointer and descriptor forms) over its tile, warps and
depth at Llama-3-8B attention shapes (bf16, d = 128, causal and not), each configuration between two timings of the
faster SDPA backend (cuDNN or FlashAttention; its ratio is against their mean). Prints % of that ceiling per shape,
best first. Used to choose the registered tile; not part of the suite's results. Every configuration is checked
against the suite's reference before it is timed.

Run from the repository root: PYTHONPATH=. python3 tools/tune_attention_triton.py [--seq 4096 16384]"""

import statistics
import sys

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

from suite.attention_problem import LOG2E, make_inputs, make_output, reference
from suite.triton import attention as ta

SEQS = (4096, 8192, 16384)
if "--seq" in sys.argv:
    SEQS = tuple(int(s) for s in sys.argv[sys.argv.index("--seq") + 1 :])
CONFIGS = [  # BLOCK_M, BLOCK_N, num_warps, stages, descriptors
    (128, 64, 8, 2, False),  # the registered tile
    (128, 64, 8, 3, False),
    (128, 128, 8, 2, False),
    (128, 128, 8, 3, False),
    (128, 128, 8, 4, False),
    (128, 64, 8, 3, True),
    (128, 128, 8, 2, True),
    (128, 128, 8, 3, True),
    (64, 128, 4, 3, False),
    (64, 64, 4, 3, False),
]


def med(fn):
    return statistics.median(do_bench(fn, warmup=25, rep=100, return_mode="all"))


def sdpa(backend, q, k, v, causal):
    def call():
        with sdpa_kernel(backend):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)

    return call


def triton_call(cfg, q, k, v, out, causal):
    bm, bn, warps, stages, desc = cfg
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    args = (q, k, v, out)
    if desc:
        from triton.tools.tensor_descriptor import TensorDescriptor

        def box(t, rows):
            flat = t.view(-1, t.shape[2], d)
            return TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [1, rows, d])

        args = (box(q, bm), box(k, bn), box(v, bn), box(out, bm))
    grid = (triton.cdiv(sq, bm), b * hq)

    def call():
        ta.attention_fwd_kernel[grid](
            *args, hq, hq // hkv, sq, skv, d**-0.5 * LOG2E,
            BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=d, CAUSAL=causal, STAGES=stages, DESC=desc,
            num_warps=warps, num_stages=stages,
        )  # fmt: skip

    return call


def main():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    for seq in SEQS:
        for causal in (0, 1):
            size = (16384 // seq, 32, 8, seq, seq, 128, causal)
            q, k, v, _ = make_inputs(size, 0, "cuda", "bf16")
            flops = 4 * size[0] * 32 * seq * seq * 128 / (2 if causal else 1)
            ref = reference((q, k, v, bool(causal)))
            ceilings = {
                name: sdpa(backend, q, k, v, bool(causal))
                for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))
            }
            ceiling_ms = {name: med(fn) for name, fn in ceilings.items()}
            best = min(ceiling_ms, key=ceiling_ms.get)
            speeds = ", ".join(f"{n} {flops / t / 1e9:.0f}" for n, t in ceiling_ms.items())
            print(f"seq {seq} causal {causal}: {speeds} TFLOP/s")
            rows = []
            for cfg in CONFIGS:
                out = make_output((q, k, v, causal))
                fn = triton_call(cfg, q, k, v, out, bool(causal))
                try:
                    fn()
                    torch.cuda.synchronize()
                    torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)
                except Exception as e:  # a configuration that does not build or fit is reported, not fatal
                    rows.append((0.0, cfg, f"failed: {type(e).__name__}: {str(e)[:80]}"))
                    continue
                before = med(ceilings[best])
                t = med(fn)
                after = med(ceilings[best])
                rows.append(((before + after) / 2 / t, cfg, f"{flops / t / 1e9:.0f} TFLOP/s"))
            for ratio, cfg, what in sorted(rows, key=lambda r: -r[0]):
                print(f"  {100 * ratio:6.1f}%  BM{cfg[0]} BN{cfg[1]} w{cfg[2]} s{cfg[3]} desc={cfg[4]}  {what}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
