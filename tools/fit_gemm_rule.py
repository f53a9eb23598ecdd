"""Score suite.gemm_rule against committed runs: per (dtype, shape, backend), the rule's choice beside the best row of
that backend, and the ratio to the ceiling the rule's choice reached where the run has that exact row (variant and
stage count). Offline, no GPU: it reads results.json files, so the rule can be refitted on sweep runs.

    python -m tools.fit_gemm_rule results/NVIDIA-H200/{llm,default}/results.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from tabulate import tabulate

from suite import gemm_rule


def _dtype(label: str) -> str:
    return label.split("->")[0]


def score(paths: list[Path]) -> tuple[list[list], dict[str, list[float]]]:
    """Table rows and, per backend, the share of the best ratio the rule's choice reached at each scored shape."""
    table, shares = [], {gemm_rule.PTX: [], gemm_rule.TRITON: []}
    for path in paths:
        data = json.loads(path.read_text())
        sms = data["meta"].get("sms") or gemm_rule.H200_SMS
        rows = [r for r in data["rows"] if r["problem"] == "gemm" and r.get("ratio_to_ceiling")]
        for label, shape, backend in sorted({(r["dtype"], r["shape"], r["backend"]) for r in rows}):
            if backend not in shares:
                continue
            m, n, k = map(int, shape.split("x"))
            dtype = _dtype(label)
            mine = [r for r in rows if (r["dtype"], r["shape"], r["backend"]) == (label, shape, backend)]
            runs = [r for r in mine if r["variant"] != "auto" and r["valid"]]
            if not runs:
                continue
            best = max(runs, key=lambda r: r["ratio_to_ceiling"])
            choice = gemm_rule.choose(backend, m, n, k, dtype, sms)
            hit = next((r for r in runs if r["variant"] == choice.kernel and r["stages"] == choice.stages), None)
            got = hit["ratio_to_ceiling"] if hit else None
            if got is not None:
                shares[backend].append(got / best["ratio_to_ceiling"])
            table.append(
                [
                    path.parent.name,
                    dtype,
                    shape,
                    backend,
                    f"{choice.kernel} s{choice.stages}",
                    f"{best['variant']} s{best['stages']}",
                    f"{best['ratio_to_ceiling']:.3f}",
                    "-" if got is None else f"{got:.3f}",
                ]
            )
    return table, shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="results.json files of committed runs")
    args = parser.parse_args(argv)
    table, shares = score(args.results)
    headers = ["run", "dtype", "shape", "backend", "rule's choice", "best row", "best ratio", "rule's ratio"]
    print(tabulate(table, headers=headers))
    for backend, values in shares.items():
        if values:
            gmean = math.exp(sum(map(math.log, values)) / len(values))
            unscored = sum(1 for row in table if row[3] == backend and row[-1] == "-")
            print(
                f"{backend}: the rule's choice reached {gmean:.3f} of the best row (geometric mean; minimum "
                f"{min(values):.3f}) at {len(values)} shapes where the run has its row; {unscored} shapes without it "
                "(the rule's kernel or depth not in the run: '-' above)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
