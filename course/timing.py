"""Timing on a shared machine, once for the whole course (notebooks 06b and 07, the benchmark):
one clock for a call, one loop that takes the fastest of several turns, the end-to-end race,
a timing's min and median, and which CPU it ran on.
"""

import os
import platform
import statistics
import time
from pathlib import Path

# The pause before each timed run in a race: PyTorch's threads keep spinning on the cores for a
# while after their last call, so a run right after PyTorch's is slowed by half or more on two
# cores (benchmarks/README.md, History)
SETTLE_S = 0.05


def seconds(call, repeat=1):
    """Wall time of one call of `call()`, averaged over `repeat` calls in a row."""
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - start) / repeat


def fastest(calls, repeat=5, warm_up=False, before=None):
    """The fastest of `repeat` timings of each of `calls` (a dict name -> function), in seconds.

    The calls take turns, so that whatever else the machine does weighs on all of them alike;
    the fastest, because other processes can only add time. `warm_up`: each is called once
    first (compiling); "each": also untimed right before each of its timed calls, so that it finds
    its model's weights wherever a run of its own calls leaves them (in the CPU's cache if they
    fit), not where another model's calls pushed them. `before()`, if given, runs untimed before
    every timed call.
    """
    if warm_up:
        for fn in calls.values():
            fn()
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeat):
        for name, fn in calls.items():
            if before is not None:
                before()
            if warm_up == "each":
                fn()
            best[name] = min(best[name], seconds(fn))
    return best


def race(runs, prompts, models, reps):
    """Seconds per generated token of each run (name -> run(prompt, seed) -> Generation).

    In every repetition each prompt is decoded by every run in turn, so the machine's load weighs
    on all alike. Before each, untimed, every model is reset and reads the prompt if it can
    (`read_prompt`, course.gpt2.GPT2's): the race times decoding, as the speed-up formula does,
    not the reading of the prompt, a cost both sides pay once per text. One sample per run and
    repetition: its time over all prompts / its tokens. Returns name -> `min_median` of those
    (with "seconds": all its timed runs' time) and the Generations of the last repetition.
    First, untimed, every model that has a `compile` method (course.gpt2.GPT2) builds all its
    compiled calls (a call of a new size would otherwise compile inside a timed run, for seconds),
    and each run decodes the first prompt once; then every model with a `clear` method (a
    course.speedup.Stopwatch) forgets those calls.
    """
    for model in models:
        getattr(model, "compile", lambda: None)()
    for run in runs.values():
        run(prompts[0], 10**6)  # a seed no timed run uses
    for model in models:
        getattr(model, "clear", lambda: None)()
    samples, last, total = {name: [] for name in runs}, {}, dict.fromkeys(runs, 0.0)
    for rep in range(reps):
        spent, made = dict.fromkeys(runs, 0.0), dict.fromkeys(runs, 0)
        for i, prompt in enumerate(prompts):
            for name, run in runs.items():
                for model in models:  # all reset first: two may share one model (Stopwatches)
                    model.reset()
                for model in models:
                    getattr(model, "read_prompt", lambda prompt: None)(prompt)
                time.sleep(SETTLE_S)  # no run pays for the threads of the run before it
                start = time.perf_counter()
                last[name, i] = run(prompt, rep)
                spent[name] += time.perf_counter() - start
                made[name] += len(last[name, i].tokens)
        for name in runs:
            samples[name].append(spent[name] / made[name])
            total[name] += spent[name]
    return {name: {**min_median(s), "seconds": total[name]} for name, s in samples.items()}, last


def min_median(samples):
    """A timing as the course reports it: the fastest sample (other processes only add time), the
    median (what a run typically takes) and every sample."""
    return dict(min=min(samples), median=statistics.median(samples), samples=samples)


def cpu_fields():
    """The first core's fields in /proc/cpuinfo ("model name", "cpu family", "flags", ...); {}
    where there is no such file."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return {}
    first = cpuinfo.read_text().split("\n\n")[0]
    pairs = (line.split(":", 1) for line in first.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def cpu_model():
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    return cpu_fields().get("model name") or platform.processor() or platform.machine() or "unknown"


def machine_name():
    """'2-core AMD EPYC CPU' and the like: which machine a timing comes from."""
    return f"{os.cpu_count()}-core {cpu_model()} CPU"


def last_level_cache_bytes():
    """The size of the CPU's largest cache (L3 on most x86 machines), from Linux's sysfs; None
    where it cannot be read. A model whose weights exceed it reads them from memory every step."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip()
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
    return max(sizes, default=None)
