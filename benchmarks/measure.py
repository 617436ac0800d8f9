"""How the benchmark measures, through the peers' one protocol (benchmarks/peers.py) only.

`measure`: the cold calls first (tinygrad compiles here), then in every repetition the step, the
draft's step and each verification pass (a sample repeats a fast call until it lasts SAMPLE_S),
and whole greedy and speculative runs from the case's prompt; the peers take turns inside every
repetition, so whatever else the machine does weighs on all alike. `end_to_end`: the target alone
against speculative decoding at every K, end to end on the case's race prompts (timing.race);
before it, `outside_time`: what COURSE's decoding spends outside the two models' calls.
"""

import sys
import time
from dataclasses import dataclass

import specmini
from course import speedup, timing
from course.timing import seconds
from course.toys import accept_tests, pass_rate

SAMPLE_S = 0.03  # a timing sample repeats a call until it lasts about this long
# Untimed calls before each sample, after its pause: the first calls after a pause are slow, up
# to 1.7 times, settling after about 8 calls (benchmarks/README.md, History), and the race, which
# decodes without pausing, never pays that
WARM_CALLS = 8
MODES = ("greedy", "speculative")  # the whole runs at temperature 0 of every repetition
TEMPERATURES = (0.0, 1.0)  # the race's
COURSE = "tinygrad"  # the framework whose rounds (alpha) and draft step (c) the report reads


@dataclass(frozen=True)
class Measured:
    """What `measure` took on one case, per framework (a peer's name)."""

    k: int  # drafts per round of the speculative runs
    cold: dict  # the cold calls: compile_s (warming up), first_step_s
    repeat: dict  # calls per sample of the step, the draft's step and the verification passes
    times: dict  # "step", "draft_step", ("verify", K), "greedy", "speculative" -> seconds, a list
    runs: list  # every whole run: framework, mode, rep, tokens
    spec_stats: dict  # the speculative run's target calls and pass rate (where rounds are known)
    kernels: dict  # kernels per call (None where not counted)


def measure(peers, case, k):
    """All timings on `case`, the peers alternating inside every repetition; and what they made."""
    progress(f"{case.name}: warming up (tinygrad compiles its JIT graphs)")
    cold = {p.name: warm_up(p, case, k) for p in peers}
    repeat = {p.name: repeats_for(p.step) for p in peers}
    times, runs, spec_stats = {p.name: {} for p in peers}, [], {}

    def sample(peer, key, call, repeat=1):
        time.sleep(timing.SETTLE_S)  # the other framework's threads idle first (timing.SETTLE_S)
        for _ in range(WARM_CALLS):  # then the call warms up, untimed
            call()
        times[peer.name].setdefault(key, []).append(seconds(call, repeat))

    for rep in range(case.reps):
        progress(f"{case.name}: repetition {rep + 1} of {case.reps}")
        for p in peers:
            sample(p, "step", p.step, repeat[p.name])
            sample(p, "draft_step", p.draft_step, repeat[p.name])
        for kk in case.verify_ks:
            for p in peers:
                sample(p, ("verify", kk), lambda p=p, kk=kk: p.verify(kk), repeat[p.name])
        for mode in MODES:
            for p in peers:
                p.reset()
                start = time.perf_counter()
                made = whole_run(p, case.prompt, mode, case.new_tokens, k)
                times[p.name].setdefault(mode, []).append(time.perf_counter() - start)
                runs.append({"framework": p.name, "mode": mode, "rep": rep, "tokens": made.tokens})
                if mode == "speculative" and made.rounds is not None:
                    spec_stats[p.name] = round_stats(made)
    kernels = {p.name: p.kernels() for p in peers}
    return Measured(k, cold, repeat, times, runs, spec_stats, kernels)


def whole_run(peer, prompt, mode, n, k):
    """One of MODES: n new tokens at temperature 0, the target alone or speculative with K = k."""
    if mode == "greedy":
        return peer.plain(prompt, n, 0.0, seed=0)
    return peer.spec(prompt, n, k, 0.0, seed=0)


def warm_up(peer, case, k):
    """The cold calls: tinygrad captures and compiles its JIT graphs here (compile_s)."""
    start = time.perf_counter()
    first_step = seconds(peer.step)
    for _ in range(2):  # TinyJit runs a call once, captures it on the second, replays after
        peer.step()
        for kk in case.verify_ks:  # gpt2.py may compile one graph per size of call
            peer.verify(kk)
    peer.reset()
    whole_run(peer, case.prompt, "greedy", min(case.new_tokens, 4), k)
    peer.reset()
    whole_run(peer, case.prompt, "speculative", min(case.new_tokens, 2 * k + 2), k)  # 2+ rounds
    return {"compile_s": time.perf_counter() - start, "first_step_s": first_step}


def repeats_for(call):
    """How many calls make one sample: fast calls are averaged so the timer's noise stays small."""
    return max(1, min(20, round(SAMPLE_S / seconds(call))))


def round_stats(generation):
    """A speculative run's target calls and the pass rate of its accept tests, from its rounds."""
    passed, _ = accept_tests(generation)
    return {
        "target_calls": len(generation.rounds),
        "pass_rate": pass_rate(generation),  # the share of accept tests passed: estimates alpha
        "accepted_per_draft": passed / max(sum(r.drafted for r in generation.rounds), 1),
    }


def outside_time(peer, case, temperatures=TEMPERATURES):
    """Before the race, per temperature and K (0: the target alone, then each raced K): the ms per
    target call that `peer` (COURSE's) spends outside its two models' calls, on the race's first
    prompt (speedup.time_outside): what notebook 06 charges to the refined formula."""
    peer.compile()
    prompt, n, out = case.race_prompts[0], case.new_tokens, {}
    for t in temperatures:

        def plain(target, draft, t=t):
            return specmini.autoregressive(target, prompt, n, temperature=t, seed=0)

        out[t] = {0: speedup.time_outside(plain, peer.target, peer.draft)[0]}
        for k in case.race_ks:

            def spec(target, draft, t=t, k=k):
                return specmini.generate(target, draft, prompt, n, k=k, temperature=t, seed=0)

            out[t][k] = speedup.time_outside(spec, peer.target, peer.draft)[0]
    return out


def end_to_end(peers, case, temperatures=TEMPERATURES):
    """End to end, per temperature: each framework's target alone and speculative decoding at
    every K of case.race_ks, racing on case.race_prompts (course.timing.race: all take turns
    inside every repetition). Runs are keyed (framework, K), K = 0 for the target alone. Seconds
    per token, speed-ups over the same framework's target alone, the pass rate (the share of
    accept tests passed in COURSE's rounds, which estimates alpha), and at temperature 0 whether
    every run's text equals COURSE's target alone, and how much that text repeats itself."""
    out, n, ks, prompts = {}, case.new_tokens, case.race_ks, range(len(case.race_prompts))
    for t in temperatures:
        runs = {}
        for p in peers:
            runs[p.name, 0] = lambda prompt, seed, p=p, t=t: p.plain(prompt, n, t, seed)
            for k in ks:
                runs[p.name, k] = lambda prompt, seed, p=p, k=k, t=t: p.spec(prompt, n, k, t, seed)
        progress(f"{case.name}: racing end to end at temperature {t}, {len(runs)} runs")
        per_token, last = timing.race(runs, case.race_prompts, peers, case.reps)
        rounds = {k: [last[(COURSE, k), i] for i in prompts] for k in ks}
        r = {
            "s_per_token": per_token,
            "speedup": {
                p.name: {k: speedup.speedups(per_token, (p.name, 0), (p.name, k)) for k in ks}
                for p in peers
            },
            "pass_rate": {k: pass_rate(rounds[k]) for k in ks},
            "pass_rate_all": pass_rate([g for k in ks for g in rounds[k]]),
        }
        if t == 0:
            plain = [last[(COURSE, 0), i].tokens for i in prompts]
            r["greedy_identical"] = {  # each run's texts against COURSE's target alone
                run: all(last[run, i].tokens == plain[i] for i in prompts) for run in runs
            }
            r["greedy_repeated_16grams"] = [speedup.repeated_share(tokens) for tokens in plain]
            r["greedy_texts"] = [bytes(tokens).decode("utf-8", "replace") for tokens in plain]
        out[t] = r
    return out


def progress(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
