"""What the benchmark says: each model's report (a dict, keyed by values: K as an int, a race's
temperature as a float, a race's run as (framework, K) with K = 0 for the target alone), the
refined formula's predictions, the printed table, and the JSON, where `as_json` alone turns those
keys into the strings the stored results hold ("1", "0.0", "tinygrad plain", "tinygrad K=4")."""

import json

from benchmarks import ROOT
from benchmarks.measure import COURSE, MODES, WARM_CALLS
from course import checkpoints, speedup
from course.timing import min_median
from course.toys import first_difference


def model_report(case, measured, floor_GBps):
    """One model's results from `measure`: min and median of every timing, per framework."""
    params = checkpoints.read_config(case.target / "config.json").parameters
    weight_bytes = params * 4  # float32 on both sides
    floor_ms = weight_bytes / (floor_GBps * 1e9) * 1e3
    reference, mismatches = compare_tokens(measured.runs)
    out = {
        "note": case.note,
        "target": str(case.target.relative_to(ROOT)) if case.name == "pair" else "random",
        "config": json.loads((case.target / "config.json").read_text()),
        "draft_config": json.loads((case.draft / "config.json").read_text()),
        "parameters": params,
        "draft_parameters": checkpoints.read_config(case.draft / "config.json").parameters,
        "weight_bytes": weight_bytes,
        "floor_ms": floor_ms,
        "prompt_tokens": len(case.prompt),
        "new_tokens": case.new_tokens,
        "k": measured.k,
        "verify_ks": list(case.verify_ks),
        "reps": case.reps,
        "tokens": reference,
        "tokens_identical": not mismatches,
        "mismatches": mismatches,
        "frameworks": {},
    }
    for name, t in measured.times.items():
        ms = {key: min_median([s * 1e3 for s in t[key]]) for key in t if key not in MODES}
        r = {
            **measured.cold[name],
            "calls_per_sample": measured.repeat[name],
            "untimed_calls_before_each_sample": WARM_CALLS,
            "step_ms": ms["step"],
        }
        r["step_over_floor"] = ms["step"]["median"] / floor_ms
        if name == COURSE:  # the peer's draft step is not timed
            r["draft_step_ms"] = ms["draft_step"]
        r["verify"] = {}
        for k in case.verify_ks:
            v = ms["verify", k]
            v["ratio_median"] = v["median"] / ms["step"]["median"]
            v["ratio_min"] = v["min"] / ms["step"]["min"]
            r["verify"][k] = v
        for mode in MODES:
            s = min_median(t[mode])
            r[mode] = {
                "seconds": s,
                "tokens_per_s_best": case.new_tokens / s["min"],
                "tokens_per_s_median": case.new_tokens / s["median"],
            }
        r["speculative"]["stats"] = measured.spec_stats.get(name)
        r["speedup_best"] = r["speculative"]["tokens_per_s_best"] / r["greedy"]["tokens_per_s_best"]
        r["speedup_median"] = (
            r["speculative"]["tokens_per_s_median"] / r["greedy"]["tokens_per_s_median"]
        )
        r["kernels"] = measured.kernels[name]
        out["frameworks"][name] = r
    return out


def compare_tokens(runs):
    """Every run's tokens against the first (COURSE's greedy run): the mismatches, if any."""
    reference = runs[0]["tokens"]
    bad = []
    for run in runs:
        at = first_difference(run["tokens"], reference)
        if at is not None:
            bad.append({k: run[k] for k in ("framework", "mode", "rep")} | {"first_diff": at})
    return reference, bad


def predictions(framework, race, outside=None):
    """Notebook 05's refined formula on COURSE's measured costs (`framework`, its part of the
    model's report): c (draft step / target step), v_K (verify K / step) and each temperature's
    alpha, estimated by the race's pass rate over all K (stored as "pass_rate_all", as in the
    race: alpha is the models' acceptance rate, the pass rate a run's estimate of it); the K it
    chooses; against the race's measured speed-ups. With `outside` (measure.outside_time), also
    the formula charged with the time outside the models' calls, in target steps: o_K per round,
    o_0 per plain token."""
    c = framework["draft_step_ms"]["median"] / framework["step_ms"]["median"]
    v = {k: x["ratio_median"] for k, x in framework["verify"].items()}
    out = {"c": c, "v": v}
    for t, r in race.items():
        alpha = r["pass_rate_all"]  # the formula's alpha, estimated by the pass rate
        ks = [k for k in r["speedup"][COURSE] if k in v]
        out[t] = {
            "pass_rate_all": alpha,
            "predicted": {k: speedup.refined_speedup(alpha, k, c, v[k]) for k in ks},
            "measured_median": {k: r["speedup"][COURSE][k]["median"] for k in ks},
            "chosen_k": speedup.choose_k(alpha, c, {k: v[k] for k in ks})[0],
        }
        if outside:
            o, step = outside[t], framework["step_ms"]["median"]
            out[t]["predicted_with_outside"] = {
                k: speedup.refined_speedup(alpha, k, c, v[k], o[k] / step, o[0] / step) for k in ks
            }
    return out


def run_name(framework, k):
    """A race's run as the JSON and the table name it: "tinygrad plain", "tinygrad K=4"."""
    return f"{framework} plain" if k == 0 else f"{framework} K={k}"


def as_json(result):
    """The results as the stored files hold them: every key a string, a race's run by its name."""

    def key(k):
        return run_name(*k) if isinstance(k, tuple) else str(k)

    def convert(x):
        if isinstance(x, dict):
            return {key(k): convert(v) for k, v in x.items()}
        return [convert(v) for v in x] if isinstance(x, list | tuple) else x

    return json.dumps(convert(result), indent=1) + "\n"


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def table(name, m):
    """One model's results as text: a column of min / median per framework."""
    fw = m["frameworks"]
    cfg = m["config"]
    lines = [
        f"== {name}: {cfg['n_layer']} x {cfg['n_embd']}, vocab {cfg['vocab_size']}, "
        f"{m['parameters'] / 1e6:.2f} M params ({m['weight_bytes'] / 1e6:.1f} MB); "
        f"draft {m['draft_config']['n_layer']} x {m['draft_config']['n_embd']}; "
        f"{m['note']}",
        f"   prompt {m['prompt_tokens']}, {m['new_tokens']} new tokens, K = {m['k']}, "
        f"{m['reps']} reps; floor {m['floor_ms']:.3f} ms/step",
        f"{'':28}" + "".join(f"{n:>24}" for n in fw),
        f"{'':28}" + "".join(f"{'min':>12}{'median':>12}" for _ in fw),
    ]

    def row(label, pick, digits=2):
        cells = "".join(
            f"{fmt(a, digits):>12}{fmt(b, digits):>12}" for a, b in map(pick, fw.values())
        )
        lines.append(f"{label:28}{cells}")

    row("compile / warm-up s", lambda r: (r["compile_s"], None))
    row("step ms/token", lambda r: (r["step_ms"]["min"], r["step_ms"]["median"]), 3)
    row("step / floor", lambda r: (r["step_ms"]["min"] / m["floor_ms"], r["step_over_floor"]), 1)
    for k in m["verify_ks"]:
        row(
            f"verify K={k} / step",
            lambda r, k=k: (r["verify"][k]["ratio_min"], r["verify"][k]["ratio_median"]),
        )
    for mode, label in (("greedy", "greedy tok/s"), ("speculative", "speculative tok/s")):
        row(
            label,
            lambda r, mode=mode: (r[mode]["tokens_per_s_best"], r[mode]["tokens_per_s_median"]),
            1,
        )
    row("speculative / greedy", lambda r: (r["speedup_best"], r["speedup_median"]))
    for n, r in fw.items():
        stats = r["speculative"]["stats"]
        if stats:
            lines.append(
                f"   {n} speculative: pass rate {stats['pass_rate']:.2f}, "
                f"{stats['target_calls']} target calls for {m['new_tokens']} tokens"
            )
        if r["kernels"]:
            kernels = r["kernels"]
            counted = ", ".join(
                f"{c} {v} ({kernels['per_block'][c]:.1f}/block)"
                for c, v in kernels["counted"].items()
            )
            lines.append(f"   {n} kernels per call: {counted}")
            lines.append(f"   gpt2.kernel_counts: {kernels['gpt2_kernel_counts']}")
    if "transformers" in fw:
        lines.append("   transformers speculative = assisted generation, same draft and K")
    if "race" in m:
        lines += race_lines(m)
    if m["tokens_identical"]:
        lines.append("   tokens identical across all runs: yes")
    else:
        lines.append(f"   !!! TOKENS DIFFER: {m['mismatches']} !!!")
    return "\n".join(lines)


def race_lines(m):
    """The end-to-end race and the refined formula's prediction, a block per temperature."""
    pred = m["predictions"]
    lines = [
        f"   end to end on {len(m['race_prompts'])} held-out prompts: ms per token (min / median),"
        f" speed-up over the same framework's target alone (median); c = {pred['c']:.3f}",
    ]
    for t, r in m["race"].items():
        p = pred[t]
        lines.append(
            f"   temperature {t}: pass rate {p['pass_rate_all']:.3f} (the formula's alpha), "
            f"refined formula's K {p['chosen_k']}"
        )
        for (fw, k), x in r["s_per_token"].items():
            extra = ""
            if k:
                extra = f"  speed-up {r['speedup'][fw][k]['median']:.2f}"
                if fw == COURSE:
                    extra += f" (predicted {p['predicted'][k]:.2f}"
                    with_outside = p.get("predicted_with_outside", {}).get(k)
                    extra += f", {with_outside:.2f} with the time outside)" if with_outside else ")"
            name = run_name(fw, k)
            lines.append(f"     {name:18} {x['min'] * 1e3:7.3f} {x['median'] * 1e3:7.3f}{extra}")
        if "greedy_identical" in r:
            same = r["greedy_identical"]
            course_same = all(v for (fw, _), v in same.items() if fw == COURSE)
            lines.append(
                f"     greedy: speculative = target alone ({COURSE}, every K): {course_same}; "
                f"transformers' greedy the same: {same.get(('transformers', 0))}"
                f"; repeated 16-grams {[round(x, 2) for x in r['greedy_repeated_16grams']]}"
            )
    return lines


def footer(result):
    """The machine under the tables: device, threads, copy bandwidth, load."""
    bw, device = result["bandwidth"], result["device"]
    # results stored before the CPU's generation was recorded have no cpu_id
    what = device["gpu"] or ", ".join(filter(None, (device["cpu"], device.get("cpu_id"))))
    lines = [
        f"device {device['tinygrad_device']} ({what}), "
        f"threads {result['threads']}, copy bandwidth numpy {fmt(bw['numpy_copy_GBps'])} GB/s, "
        f"tinygrad {fmt(bw.get('tinygrad_copy_GBps'))} GB/s; load average "
        f"{fmt(result['load_before'][0])} before, {fmt(result['load_after'][0])} after"
    ]
    if not result["tokens_identical"]:
        lines.append("!!! TOKENS DIFFER between runs: see 'mismatches' in the JSON !!!")
    return "\n".join(lines)
