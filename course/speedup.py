"""Speed-up, predicted and measured: notebook 05's refined formula, choosing K from measured
costs, the alpha a speed-up would need, and the timers that measure a pair, in isolation or as a
race paid them (notebooks 06b and 07, the benchmark in `benchmarks/`).

Every timing here is wall time on whatever else the machine is doing, so the things compared take
turns inside every repetition, and the report keeps both the fastest and the median.
"""

import collections
import time

import specmini
from course import timing


def refined_speedup(alpha, k, c, verify_cost, overhead=0.0, plain_overhead=0.0):
    """E[tokens] (1 + o_0) / (K c + v_K + o_K): the round's verification pass costs v_K target
    steps, not 1. With the time outside the models' calls (`time_outside`), in target steps:
    `overhead` o_K per speculative round, `plain_overhead` o_0 per plain token (plain decoding is
    K = 0); both 0 in notebook 05's formula."""
    per_round = specmini.expected_tokens(alpha, k) / (k * c + verify_cost + overhead)
    return per_round * (1 + plain_overhead)


def alpha_for_tokens(tokens, k):
    """The alpha at which specmini.expected_tokens(alpha, k) equals `tokens` (1 to k + 1 per
    round), by bisection far past float rounding: expected_tokens grows with alpha."""
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if specmini.expected_tokens(mid, k) < tokens else (low, mid)
    return (low + high) / 2


def alpha_needed(goal, k, c, verify_cost, overhead=0.0, plain_overhead=0.0):
    """The alpha at which `refined_speedup` reaches `goal` with these costs: 0.0 where even
    alpha = 0 reaches it, None where even alpha = 1 falls short."""
    tokens = goal * (k * c + verify_cost + overhead) / (1 + plain_overhead)  # needed per round
    if tokens > k + 1:  # a round yields at most k + 1 tokens
        return None
    return 0.0 if tokens <= 1 else alpha_for_tokens(tokens, k)


def choose_k(alpha, c, verify_costs, overhead=0.0):
    """The K (a key of `verify_costs`, K -> v_K) with the largest refined speed-up, and that
    speed-up; (0, 1.0), plain decoding, when no K beats it."""
    speedup = {k: refined_speedup(alpha, k, c, v, overhead) for k, v in verify_costs.items()}
    best = max(speedup, key=speedup.get)
    return (best, speedup[best]) if speedup[best] > 1 else (0, 1.0)


class Stopwatch:
    """A model that clocks its calls: their total wall time (`seconds`) and each call's, by the
    count of rows it returns (`calls`: rows -> list of seconds). A model with a cache may compute
    more rows than it returns: a generation's first call reads the prompt unless it was read
    before (timing.race reads it, unclocked: `read_prompt` is the model's own), and a draft's call
    after a bonus round catches up on the token it never read."""

    def __init__(self, model):
        self.model = model
        self.clear()

    def clear(self):  # forget every call clocked so far (timing.race: its untimed runs)
        self.seconds, self.calls = 0.0, collections.defaultdict(list)

    def __call__(self, tokens, start):
        began = time.perf_counter()
        try:
            return self.model(tokens, start)
        finally:
            spent = time.perf_counter() - began
            self.seconds += spent
            self.calls[len(tokens) - start].append(spent)

    def count(self):  # calls clocked since the last clear
        return sum(map(len, self.calls.values()))

    def __getattr__(self, name):  # max_context, reset, ...: the model's own
        return getattr(self.model, name)


def time_outside(decode, target, draft):
    """Run decode(target, draft) -> Generation with both models timed: the ms per target call
    spent outside the models' calls (sampling, the accept tests, the Python around them), and
    the Generation. A target call is a round of speculative decoding, a token of plain."""
    timed = Stopwatch(target), Stopwatch(draft)
    target.reset(), draft.reset()
    began = time.perf_counter()
    g = decode(*timed)
    outside = time.perf_counter() - began - timed[0].seconds - timed[1].seconds
    return 1000 * outside / len(g.rounds), g


def step_costs(target, draft, text, at, ks, repeat=20):
    """A draft step and a target step (one new token at position `at` against a warm cache), in
    ms, and v_K: a target pass over K + 1 new tokens, in target steps, for each K in ks. Each timed
    call follows an untimed one of its own, as in a round, where the draft's calls come in a row."""
    calls = {
        "draft": lambda: draft(text[: at + 1], at),
        "target": lambda: target(text[: at + 1], at),
    }
    calls.update({k: (lambda k=k: target(text[: at + k + 1], at)) for k in ks})
    ms = {name: 1000 * t for name, t in timing.fastest(calls, repeat, warm_up="each").items()}
    return ms["draft"], ms["target"], {k: ms[k] / ms["target"] for k in ks}


def costs_in_race(alone, target, draft, race_summary, k):
    """The refined formula's costs as a race paid them (`timing.race` with Stopwatches, its runs
    named "target alone" and "speculative": `alone` clocked the target alone's calls, `target`
    and `draft` those of speculative decoding with K = k), in the race's own target step: the
    target alone's median one-token call (`step_ms`). c: the draft's median one-token call; v_K:
    the target's median pass over k + 1 new tokens; o_K: the time outside both models per
    speculative round; o_0: per plain token. Not a forecast: it checks whether the formula's
    terms account for the race's time. Medians leave out what some calls compute beyond their
    rows (the draft's catch-up call after every bonus round, about alpha^k of the rounds), and so
    does the formula."""

    def median(calls):
        return timing.min_median(calls)["median"]

    clocked = {"the target alone": (alone, 1), "a draft": (draft, 1), "the target": (target, k + 1)}
    for name, (watch, rows) in clocked.items():
        if not watch.calls.get(rows):
            raise ValueError(
                f"no call of {name} returning {rows} row(s) was clocked: costs_in_race needs "
                f"the race's Stopwatches and the K it ran (k = {k})"
            )
    step = median(alone.calls[1])

    def outside(run, inside, calls):  # per call of the target: a round, or a plain token
        return (race_summary[run]["seconds"] - inside) / calls / step

    return dict(
        step_ms=1000 * step,
        c=median(draft.calls[1]) / step,
        v=median(target.calls[k + 1]) / step,
        o_k=outside("speculative", target.seconds + draft.seconds, target.count()),
        o_0=outside("target alone", alone.seconds, alone.count()),
    )


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
