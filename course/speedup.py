"""Speed-up, predicted and measured: notebook 05's refined formula, choosing K from measured
costs, and the timers that measure a pair (notebooks 06 and 07, `benchmarks/decode.py`).

Every timing here is wall time on whatever else the machine is doing, so the things compared take
turns inside every repetition, and the report keeps both the fastest and the median.
"""

import statistics
import time

import numpy as np

import specmini
from course import timing
from course.toys import accept_tests


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


def tokens_per_second(runs, models, repeat=3):
    """Tokens per second of each of `runs` (a dict name -> a function returning a Generation):
    the fastest of `repeat` runs, each from empty caches, the runs taking turns."""
    made = {}

    def counted(name, run):
        return lambda: made.__setitem__(name, len(run().tokens))

    calls = {name: counted(name, run) for name, run in runs.items()}
    best = timing.fastest(calls, repeat, before=lambda: [m.reset() for m in models])
    return {name: made[name] / t for name, t in best.items()}


def race(runs, prompts, models, reps):
    """Seconds per generated token of each run (name -> run(prompt, seed) -> Generation).

    In every repetition each prompt is decoded by every run in turn, from empty caches (`models`
    are reset before each), so the machine's load weighs on all alike. One sample per run and
    repetition: its time over all prompts / its tokens. Returns name -> dict(min, median, samples)
    and the Generations of the last repetition. Each run decodes the first prompt once, untimed,
    first: compiled calls are built then.
    """
    for run in runs.values():
        run(prompts[0], 10**6)  # a seed no timed run uses
    samples, last = {name: [] for name in runs}, {}
    for rep in range(reps):
        spent, made = dict.fromkeys(runs, 0.0), dict.fromkeys(runs, 0)
        for i, prompt in enumerate(prompts):
            for name, run in runs.items():
                for model in models:
                    model.reset()
                start = time.perf_counter()
                last[name, i] = run(prompt, rep)
                spent[name] += time.perf_counter() - start
                made[name] += len(last[name, i].tokens)
        for name in runs:
            samples[name].append(spent[name] / made[name])
    summary = {
        name: dict(min=min(s), median=statistics.median(s), samples=s)
        for name, s in samples.items()
    }
    return summary, last


def speedups(race_summary, baseline, name):
    """Speed-up of run `name` over `baseline` from a race: fastest over fastest, median over
    median (per-token times, so a larger ratio is faster)."""
    base, run = race_summary[baseline], race_summary[name]
    return dict(best=base["min"] / run["min"], median=base["median"] / run["median"])


def alpha_of(generations):
    """The share of accept tests passed over some Generations (notebook 04's alpha)."""
    passed, run = np.sum([accept_tests(g) for g in generations], axis=0)
    return passed / max(run, 1)
