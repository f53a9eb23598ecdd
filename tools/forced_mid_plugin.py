"""A plugin (python -m suite.run --plugin tools/forced_mid_plugin.py) that registers the PTX mid-M kernel at forced
tiles as variants of their own, so that a suite run times them, and profiles them with --profile, beside cuBLAS and
the registered rows, where the registered mid-M row takes only the tile its model picks (and the probe,
tools/tune_gemm_mid.py, times without profiling). Each tile's build takes the depths its ring fits. The tiles come
from PIPESUITE_FORCED_MID (comma-separated WxT: W weight rows, 128 or 192 on two or three consumer warpgroups, 256
the wide tile on two; T tokens), by default the wide tiles of 160 and 192 tokens and the narrow one of 160. Not part
of the suite's results.

    PIPESUITE_FORCED_MID=256x160,128x160 python -m suite.run --plugin tools/forced_mid_plugin.py --problem gemm
        --dtype fp16 --size 950x11008x3072 --profile --variant torch:cuBLAS "ptx:forced mid 256x160"
        "ptx:forced mid 128x160"   (one line)
"""

from __future__ import annotations

import os

from suite.registration import needs_sm90a, register_kernel
from tools.tune_gemm_mid import tile_module

DEFAULT = "256x160,256x192,128x160"
LAYOUTS = {128: (2, 1), 192: (3, 1), 256: (2, 2)}  # weight rows -> (consumer warpgroups, m64 weight tiles per consumer)


def forced_tile(weight_rows: int, tokens: int):
    """The mid-M build of one tile (the probe's, tools/tune_gemm_mid.tile_module: the depths its ring fits), at every
    dtype the tile takes."""
    if weight_rows not in LAYOUTS:
        raise ValueError(f"{weight_rows} weight rows: the mid-M tiles have {sorted(LAYOUTS)}")
    module = tile_module(tokens, *LAYOUTS[weight_rows])
    module.dtypes = type(module).dtypes  # the probe's build holds one dtype: every one, less those the tile lacks
    module.dtypes = module.tile_dtypes()
    return module


for spec in os.environ.get("PIPESUITE_FORCED_MID", DEFAULT).split(","):
    w, t = map(int, spec.strip().split("x"))
    register_kernel(
        "gemm",
        "ptx",
        f"forced mid {w}x{t}",
        forced_tile(w, t),
        gate=needs_sm90a,
        description=f"the PTX mid-M kernel forced to {w} weight rows x {t} tokens (tools/forced_mid_plugin.py)",
    )
