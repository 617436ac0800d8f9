"""Speed-up, predicted and measured: notebook 05's refined formula, choosing K from measured
costs, and the timers that measure a pair (notebooks 06 and 07, the benchmark in `benchmarks/`).

Every timing here is wall time on whatever else the machine is doing, so the things compared take
turns inside every repetition, and the report keeps both the fastest and the median.
"""

import specmini
from course import timing

# The compiled calls (course.gpt2.GPT2's buckets) a draft needs in specmini.generate: one new
# token, two after a bonus round (its last draft was never fed to it), and a prompt in chunks.
DRAFT_BUCKETS = (1, 2, 16)


def refined_speedup(alpha, k, c, verify_cost):
    """E[tokens] / (K c + v_K): the round's verification pass costs v_K target steps, not 1."""
    return specmini.expected_tokens(alpha, k) / (k * c + verify_cost)


def choose_k(alpha, c, verify_costs):
    """The K (a key of `verify_costs`, K -> v_K) with the largest refined speed-up, and that
    speed-up; (0, 1.0), plain decoding, when no K beats it."""
    best = max(verify_costs, key=lambda k: refined_speedup(alpha, k, c, verify_costs[k]))
    s = refined_speedup(alpha, best, c, verify_costs[best])
    return (best, s) if s > 1 else (0, 1.0)


def step_costs(target, draft, text, at, ks, repeat=20):
    """A draft step and a target step (one new token at position `at` against a warm cache), in
    ms, and v_K: a target pass over K + 1 new tokens, in target steps, for each K in ks."""
    calls = {
        "draft": lambda: draft(text[: at + 1], at),
        "target": lambda: target(text[: at + 1], at),
    }
    calls.update({k: (lambda k=k: target(text[: at + k + 1], at)) for k in ks})
    ms = {name: 1000 * t for name, t in timing.fastest(calls, repeat, warm_up=True).items()}
    return ms["draft"], ms["target"], {k: ms[k] / ms["target"] for k in ks}


def speedups(race_summary, baseline, name):
    """Speed-up of run `name` over `baseline` from `timing.race`: fastest over fastest, median
    over median (per-token times, so a larger ratio is faster)."""
    base, run = race_summary[baseline], race_summary[name]
    return dict(best=base["min"] / run["min"], median=base["median"] / run["median"])


def repeated_share(tokens, n=16):
    """The share of a text's n-token windows that already occurred earlier in it: near 1 for a
    text stuck in a loop, near 0 for one that goes somewhere."""
    windows = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    seen, repeats = set(), 0
    for w in windows:
        repeats += w in seen
        seen.add(w)
    return repeats / max(len(windows), 1)
