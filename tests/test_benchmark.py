"""The benchmark keeps working: its fast mode (tinygrad, offline pair, 8 tokens, 2 repetitions).

It runs the documented command in a subprocess, writes its JSON to a temporary folder (never into
the repository), and checks the fields that the results files promise and the token identity.
"""

import json
import pathlib
import subprocess
import sys

import pytest

from course import checkpoints, speedup

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_fast_mode_reports_every_measurement(tmp_path):
    out = tmp_path / "fast.json"
    cmd = [sys.executable, "-m", "benchmarks.decode", "--fast", "--out", str(out)]
    # a guard against a hang, not a speed limit: about 75 s alone, several times that cold and busy
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tokens identical across all runs: yes" in run.stdout

    result = json.loads(out.read_text())
    for field in ("device", "versions", "threads", "load_before", "load_after", "bandwidth"):
        assert field in result, field
    assert result["device"]["tinygrad_device"] and result["device"]["cpu"]
    assert result["threads"]["tinygrad_NUM_CPU_THREADS"] >= 1
    assert result["versions"]["tinygrad"] and result["bandwidth"]["floor_GBps"] > 0
    assert result["fast"] and result["tokens_identical"]

    pair = result["models"]["pair"]
    assert pair["tokens_identical"] and not pair["mismatches"]
    assert len(pair["tokens"]) == pair["new_tokens"] == 8
    committed = checkpoints.read_config(ROOT / "models" / "pytarget" / "config.json")
    assert pair["floor_ms"] > 0 and pair["parameters"] == committed.parameters
    tiny = pair["frameworks"]["tinygrad"]
    assert set(pair["frameworks"]) == {"tinygrad"}  # fast mode never needs torch
    assert tiny["compile_s"] > 0 and 0 < tiny["step_ms"]["min"] <= tiny["step_ms"]["median"]
    assert len(tiny["step_ms"]["samples"]) == pair["reps"] == 2
    assert set(tiny["verify"]) == {"1", "4"} and pair["verify_ks"] == [1, 4]
    assert all(v["ratio_median"] > 0 for v in tiny["verify"].values())
    for mode in ("greedy", "speculative"):
        assert tiny[mode]["tokens_per_s_best"] >= tiny[mode]["tokens_per_s_median"] > 0
    stats = tiny["speculative"]["stats"]
    assert stats["target_calls"] >= 1
    # the course's acceptance, the share of accept tests passed, is at least accepted per draft
    assert 0 <= stats["accepted_per_draft"] <= stats["pass_rate"] <= 1
    assert tiny["kernels"]["counted"]["step"] > 0
    reported = tiny["kernels"]["gpt2_kernel_counts"]
    assert reported and all(n > 0 for n in reported.values())
    assert 0 < tiny["draft_step_ms"]["min"] <= tiny["draft_step_ms"]["median"]

    # the end-to-end race: the target alone against speculative decoding, both temperatures
    assert set(pair["race"]) == {"0.0", "1.0"} and len(pair["race_prompts"]) == 1
    for t, race in pair["race"].items():
        assert set(race["s_per_token"]) == {"tinygrad plain", "tinygrad K=4"}
        assert race["speedup"]["tinygrad"]["4"]["median"] > 0
        assert 0 <= race["pass_rate_all"] <= 1
        predicted = pair["predictions"][t]
        assert predicted["predicted"]["4"] > 0 and predicted["chosen_k"] in (0, 4)
        assert predicted["pass_rate_all"] == race["pass_rate_all"] and "alpha" not in predicted
        # the time outside the models' calls, measured before the race and charged to the formula
        assert pair["outside_ms"][t]["0"] > 0 and pair["outside_ms"][t]["4"] > 0
        assert predicted["predicted_with_outside"]["4"] > 0
    assert all(pair["race"]["0.0"]["greedy_identical"].values())
    assert pair["predictions"]["c"] > 0 and set(pair["predictions"]["v"]) == {"1", "4"}


def test_the_formula_reads_the_pass_rate_under_its_own_name():
    """The refined formula's alpha is estimated by the race's pass rate, which the predictions
    store as the race does ("pass_rate_all"): alpha, the models' acceptance rate, is another
    quantity, and no stored result names the estimate alpha."""
    from benchmarks.report import predictions

    framework = {
        "step_ms": {"median": 10.0},
        "draft_step_ms": {"median": 2.0},
        "verify": {4: {"ratio_median": 1.5}},
    }
    race = {0.0: {"pass_rate_all": 0.8, "speedup": {"tinygrad": {4: {"median": 1.7}}}}}
    predicted = predictions(framework, race)[0.0]
    assert predicted["pass_rate_all"] == 0.8 and "alpha" not in predicted
    assert predicted["predicted"][4] == pytest.approx(speedup.refined_speedup(0.8, 4, 0.2, 1.5))
    stored = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    assert stored, "no stored results found"
    for path in stored:
        for model in json.loads(path.read_text())["models"].values():
            blocks = [p for p in model.get("predictions", {}).values() if isinstance(p, dict)]
            assert all("alpha" not in p for p in blocks), path.name


def test_the_json_keys_are_the_stored_files_strings():
    """Inside Python a race's run is (framework, K), K = 0 for the target alone, and K and the
    temperature are numbers; the JSON names them as the stored results do, in one place."""
    from benchmarks.report import as_json

    report = {
        "race": {0.0: {"s_per_token": {("tinygrad", 0): 1.0, ("tinygrad", 4): 2.0}}},
        "verify": {1: {"median": 1.0}},
        "load": (0.5, 0.25),
    }
    assert json.loads(as_json(report)) == {
        "race": {"0.0": {"s_per_token": {"tinygrad plain": 1.0, "tinygrad K=4": 2.0}}},
        "verify": {"1": {"median": 1.0}},
        "load": [0.5, 0.25],
    }
