"""Dump the SASS of every NVRTC kernel the registry knows, one file per (arch, instantiation), for a before/after
comparison of a refactor: `python tools/sass_snapshot.py DIR`, then `diff -rwB BEFORE AFTER`.

Line info is not part of `cuobjdump -sass` output, so moving code between files leaves the listing unchanged unless an
instruction changed. cuobjdump pads its columns to the longest symbol of the cubin, so compare with `diff -rwB`
(blank lines and padding aside)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from suite.kernel import NvrtcModule
from suite.registry import variants
from suite.sass import split_functions


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    seen = set()
    for v in variants():
        kernel = v.kernel
        if not isinstance(kernel, NvrtcModule):
            continue
        for arch in kernel.archs:
            module = kernel.build(arch)
            per_symbol = split_functions(module.sass())
            for expr, symbol in module.symbols.items():
                key = (module.arch, expr)
                if key in seen:
                    continue
                seen.add(key)
                name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{module.arch}-{expr}")
                (out / f"{name}.sass").write_text(per_symbol.get(symbol, ""))
    print(f"{len(seen)} instantiations in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
