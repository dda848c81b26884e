"""The size-growth evaluation of DCDM: its growth arithmetic, and a tiny run
that resumes from its own rows."""

import json

import pytest

from benchmarks import dcdm_growth


def test_growth_per_doubling():
    # 10 → 20 → 40: twice per doubling; 10 → 12 → 18: (1.8)^(1/2), largest 1.5
    assert dcdm_growth.growth([10, 20, 40]) == {"mean": 2.0, "max": 2.0}
    g = dcdm_growth.growth([10, 12, 18])
    assert g["mean"] == pytest.approx(1.8**0.5, rel=1e-12) and g["max"] == pytest.approx(1.5)
    assert dcdm_growth.growth([10, None, 40]) == {"mean": None, "max": None}


def test_tiny_run_resumes_and_tabulates(tmp_path, monkeypatch):
    out = tmp_path / "rows.jsonl"
    argv = [
        "--resolutions", "16", "32", "--families", "closed", "--seeds", "201",
        "--methods", "dcdm", "cg", "--out", str(out),
    ]  # fmt: skip
    text = dcdm_growth.main(argv)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["scene"], r["method"]) for r in rows} == {
        (f"n{n}_closed_seed201", m) for n in (16, 32) for m in ("dcdm", "cg")
    }
    for r in rows:  # 1e-4 is read off the 1e-6 solve: reached first
        assert r["converged"] and 1 <= r["iterations_at"]["0.0001"] < r["iterations"]
        assert r["iterations_at"]["1e-06"] == r["iterations"]
    cg = {r["resolution"]: r["iterations"] for r in rows if r["method"] == "cg"}
    line = next(x for x in text.splitlines() if x.startswith("| cg |") and "rtol" not in x)
    assert f"{cg[16]:.1f}" in line and f"{cg[32] / cg[16]:.2f}" in line
    assert dcdm_growth.main(argv) == text  # a rerun reads its rows back, solves nothing
    assert len(out.read_text().splitlines()) == len(rows)
    assert out.with_suffix(".md").read_text() == text + "\n"
    # a second model into the same file solves only with its own generator (here
    # the same weights under another name: the same table)
    from sciml.dcdm import pretrained

    monkeypatch.setattr(dcdm_growth, "load_generator", lambda name: pretrained("poisson2d"))
    assert dcdm_growth.main([*argv, "--model", "copy"]) == text
    added = [json.loads(line) for line in out.read_text().splitlines()][len(rows) :]
    assert [(r["model"], r["method"]) for r in added] == [("copy", "dcdm")] * 2
