"""tools/agreement.py's checks on made-up runs: back-to-back agreement and the --gpus run against one GPU."""

import importlib.util
import json
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "agreement", Path(__file__).resolve().parents[1] / "tools" / "agreement.py"
)
agreement = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(agreement)


def _run(path, medians, ratios=None, total=100.0, plan="p1"):
    rows = [
        {
            "problem": "gemm",
            "dtype": "fp16->fp32acc->fp16",
            "shape": "4096x4096x4096",
            "backend": "ptx",
            "variant": f"v{i}",
            "stages": 3,
            "measured": True,
            "valid": True,
            "median_ms": m,
            "ratio_to_ceiling": (ratios or [0.9] * len(medians))[i],
        }
        for i, m in enumerate(medians)
    ]
    path.write_text(json.dumps({"meta": {"plan": {"id": plan}, "phase_seconds": {"total": total}}, "rows": rows}))
    return str(path)


def test_back_to_back(tmp_path, capsys):
    a = _run(tmp_path / "a.json", [1.0] * 10)
    assert agreement.main(["back-to-back", a, _run(tmp_path / "b.json", [1.002] * 9 + [1.01])]) == 0
    assert "median difference 0.20%" in capsys.readouterr().out
    assert agreement.main(["back-to-back", a, _run(tmp_path / "c.json", [1.0] * 9 + [1.05])]) == 1  # one beyond 3%
    assert agreement.main(["back-to-back", a, _run(tmp_path / "d.json", [1.008] * 10)]) == 1  # median 0.8%


def test_gpus_against_one_gpu(tmp_path, capsys):
    one = _run(tmp_path / "one.json", [1.0] * 4, total=100.0)
    assert agreement.main(["gpus", one, _run(tmp_path / "two.json", [1.0] * 4, [0.91] * 4, total=55.0)]) == 0
    assert "= 0.55 (<= 0.60): PASS" in capsys.readouterr().out
    assert agreement.main(["gpus", one, _run(tmp_path / "slow.json", [1.0] * 4, total=70.0)]) == 1
    assert agreement.main(["gpus", one, _run(tmp_path / "off.json", [1.0] * 4, [0.95, 0.9, 0.9, 0.9], 50.0)]) == 1


def test_rows_the_host_feeds_are_marked_and_still_count(tmp_path, capsys):
    """A launch-bound row (its time partly the host's) that moved beyond 3% is marked ^ and counted apart, and the
    verdict still fails on it."""
    a = _run(tmp_path / "a.json", [1.0] * 10)
    b = json.loads(Path(_run(tmp_path / "b.json", [1.0] * 9 + [1.05])).read_text())
    b["rows"][9]["launch_bound"] = True
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert agreement.main(["back-to-back", a, str(tmp_path / "b.json")]) == 1
    out = capsys.readouterr().out
    assert "1 of the 1 beyond 3% launch-bound in either run (^)" in out
    assert "5.00%^ gemm" in out and "0.00%  gemm" in out
