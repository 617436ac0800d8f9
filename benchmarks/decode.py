"""Decoding speed of course/gpt2.py (tinygrad) against PyTorch + transformers, same weights.

Run from the repository root:

    .venv/bin/python -m benchmarks.decode --fast        # tinygrad, offline pair, a few tokens (CI)
    .venv-bench/bin/python -m benchmarks.decode         # + transformers: offline pair, GPT-2 small
    .venv-bench/bin/python -m benchmarks.decode --models pair,small,medium --save

(.venv-bench: `python3 -m venv .venv-bench && .venv-bench/bin/pip install -r
requirements-bench.txt -e .`; without torch and transformers the peer is skipped.)

Both frameworks load the same safetensors file. Measured in one run, the frameworks alternating
within every repetition, min and median over the repetitions:

- step: ms per token for one new token at a warm KV cache (a 32-token prompt);
- verify K: one pass over K + 1 new tokens at the same cache (what checks K drafts), / step;
- end to end: greedy tokens/s target-only, speculative (specmini.generate; transformers' assisted
  generation with the same draft and K), and whether all of them produced the same tokens;
- floor: weight bytes / measured copy bandwidth, the least a memory-bound step can take.

It prints a table and writes JSON (device, versions, threads, machine load) to
benchmarks/results/tmp/ (git-ignored), or with --save to benchmarks/results/<device>-<date>.json.
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata

# isort: off
import course  # noqa: F401  first: it picks tinygrad's CPU runtime, which tinygrad reads once

# isort: on
import numpy as np
from tinygrad import Device, Tensor
from tinygrad.helpers import NUM_CPU_THREADS, GlobalCounters
from tinygrad.nn.state import safe_load

import specmini
from course import checkpoints, corpus, gpt2, runtime, speedup, timing
from course.timing import cpu_model, min_median, seconds
from course.toys import accept_tests, first_difference

ROOT = pathlib.Path(__file__).resolve().parent.parent

RESULTS = ROOT / "benchmarks" / "results"
TINYGRAD_ENV = ("DEV", "JIT", "BEAM", "JITBEAM", "NUM_CPU_THREADS", "CACHELEVEL", "HCQ2")
SCRATCH = RESULTS / "tmp"  # git-ignored: ad-hoc runs must leave `git status` clean
KS = tuple(range(1, 9))
FAST_KS = (1, 4)  # fast mode: only what speculation with K = 4 compiles anyway
PROMPT_LEN = 32
FAST_PROMPT_LEN = 8  # fast mode: a prompt that fits the smallest graphs gpt2.py compiles anyway
DRAFT_LAYERS = 2  # random targets get a draft made of their own first layers
QUIET = 0.05  # how much the random target's later blocks add: see random_pair
SHAPES = {  # Hugging Face's gpt2 and gpt2-medium configs
    "small": dict(n_embd=768, n_layer=12, n_head=12),
    "medium": dict(n_embd=1024, n_layer=24, n_head=16),
}
NEW_TOKENS = {"pair": 128, "small": 16, "medium": 8}  # tinygrad takes seconds per token on 2 cores
REPS = {"pair": 5, "small": 3, "medium": 2}  # medium takes minutes per repetition on 2 cores
SAMPLE_S = 0.03  # a timing sample repeats a call until it lasts about this long
PAIR_PROMPTS, PAIR_PROMPT_LEN = 4, 64  # held-out code (course.corpus.code_prompts), as bytes
SPEC_KS = (1, 2, 3, 4, 5, 6)  # the K raced end to end, each against the target alone
TEMPERATURES = (0.0, 1.0)


@dataclass
class Case:
    """One target/draft pair and what to run on it."""

    name: str
    target: pathlib.Path
    draft: pathlib.Path
    prompt: list
    new_tokens: int
    reps: int
    note: str
    ks: tuple = KS  # the K of the verification passes timed
    prompts: list = None  # the end-to-end race's prompts (the pair: held-out code)


# ---------- the models ----------


def random_pair(shape, directory):
    """A random-weight GPT-2 of this shape in HF's layout, and a draft of its first layers.

    Random weights time the same as trained ones, but two unrelated random models never agree,
    and speculation would only ever be measured rejecting everything. So the target's later
    blocks write little into the residual stream (their output projections scaled by QUIET):
    its first blocks, the draft, then predict it most of the time, as a trained draft does.
    """
    target, draft = directory / "target", directory / "draft"
    checkpoints.save(gpt2.GPT2(gpt2.Config(**SHAPES[shape])), target)
    loaded = safe_load(str(target / "model.safetensors"))
    state = {k: v.to(Device.DEFAULT).numpy() for k, v in loaded.items()}  # no CPU compiler needed
    for key, value in state.items():
        if layer_of(key) >= DRAFT_LAYERS and key.endswith("c_proj.weight"):
            value *= QUIET
    write_weights(state, target)
    config = json.loads((target / "config.json").read_text()) | {"n_layer": DRAFT_LAYERS}
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_weights({k: v for k, v in state.items() if layer_of(k) < DRAFT_LAYERS}, draft)
    return target, draft


def layer_of(key):
    """The block a weight belongs to (-1 for embeddings and the final norm)."""
    found = re.search(r"\.h\.(\d+)\.", key)
    return int(found.group(1)) if found else -1


def write_weights(state, directory):
    checkpoints.write_safetensors(state, directory / "model.safetensors", {"format": "pt"})


def make_case(name, scratch, reps, new_tokens, prompt_len=PROMPT_LEN):
    if name == "pair":
        prompts = corpus.code_prompts(PAIR_PROMPTS, PAIR_PROMPT_LEN)
        prompt = prompts[0][:prompt_len]
        target, draft = ROOT / "models" / "pytarget", ROOT / "models" / "pydraft"
        note = "offline pair: trained byte-level models from models/; prompts: held-out code"
    else:
        target, draft = random_pair(name, scratch / name)
        vocab = json.loads((target / "config.json").read_text())["vocab_size"]
        prompt = np.random.default_rng(0).integers(0, vocab, prompt_len).tolist()
        note = f"random weights; draft = the target's first {DRAFT_LAYERS} layers"
    case = Case(
        name, target, draft, prompt, new_tokens or NEW_TOKENS[name], reps or REPS[name], note
    )
    case.prompts = prompts if name == "pair" else [prompt]
    return case


# ---------- the two frameworks ----------


class Tinygrad:
    """course/gpt2.py through its public API, as the course uses it."""

    name = "tinygrad"

    def __init__(self, case, beam=0):
        self.case, self.prompt = case, case.prompt
        # a compiled call for each pass timed (K + 1 new tokens), one token, and prompts
        buckets = tuple(sorted({1, 2, 16} | {k + 1 for k in case.ks}))
        self.target = checkpoints.load(case.target, beam=beam, buckets=buckets)
        self.draft = checkpoints.load(case.draft, beam=beam, buckets=speedup.DRAFT_BUCKETS)
        self.layers = self.target.config.n_layer

    def draft_step(self):
        self.draft(self.prompt, len(self.prompt) - 1)

    def plain(self, prompt, n, temperature, seed):
        return specmini.autoregressive(self.target, prompt, n, temperature=temperature, seed=seed)

    def spec(self, prompt, n, k, temperature, seed):
        return specmini.generate(
            self.target, self.draft, prompt, n, k=k, temperature=temperature, seed=seed
        )

    def reset(self):
        self.target.reset(), self.draft.reset()

    def compile(self):  # every compiled call built before the race times anything
        self.target.compile(), self.draft.compile()

    def step(self):
        # the cache holds prompt[:-1] from the previous call: only the last token is computed
        self.target(self.prompt, len(self.prompt) - 1)

    def verify(self, k):
        self.target(self.prompt + self.prompt[:k], len(self.prompt) - 1)

    def greedy(self, n):
        self.target.reset()
        return specmini.autoregressive(self.target, self.prompt, n, temperature=0).tokens, None

    def speculative(self, n, k):
        self.target.reset()
        self.draft.reset()
        out = specmini.generate(self.target, self.draft, self.prompt, n, k=k, temperature=0, seed=0)
        passed, run = accept_tests(out)
        return out.tokens, {
            "target_calls": len(out.rounds),
            "acceptance": passed / max(run, 1),  # the course's: the share of accept tests passed
            "accepted_per_draft": passed / max(sum(r.drafted for r in out.rounds), 1),
        }

    def kernels(self):
        """Kernels launched per call: counted here, and by gpt2.kernel_counts per compiled call."""
        counted = {"step": launches(self.step), "verify K=4": launches(lambda: self.verify(4))}
        reported = {
            str(n): len(programs) for n, programs in gpt2.kernel_counts(self.target).items()
        }
        per_block = {k: v / self.layers for k, v in counted.items()}
        return {"counted": counted, "per_block": per_block, "gpt2_kernel_counts": reported}


def launches(call):
    """Kernels one call launches (tinygrad counts JIT replays too)."""
    before = GlobalCounters.kernel_count
    call()
    return GlobalCounters.kernel_count - before


class Transformers:
    """The peer: GPT2LMHeadModel on the same directory, float32, eval, no grad; on the GPU when
    tinygrad runs on one (CUDA), else on the CPU."""

    name = "transformers"

    def __init__(self, case):
        import torch
        import transformers
        from transformers import DynamicCache, GenerationConfig, GPT2LMHeadModel

        transformers.logging.set_verbosity_error()  # its deprecation notes would bury the table
        transformers.logging.disable_progress_bar()
        torch.set_grad_enabled(False)
        self.torch, self.case, self.prompt = torch, case, case.prompt
        on_gpu = Device.DEFAULT in ("CUDA", "NV") and torch.cuda.is_available()
        self.device = torch.device("cuda" if on_gpu else "cpu")
        self.generation_config = GenerationConfig

        def load(d):
            # no end-of-text token (the byte-level pair has no 50256): every run makes exactly
            # n tokens, as specmini does
            kw = {"bos_token_id": None, "eos_token_id": None}
            model = GPT2LMHeadModel.from_pretrained(d, dtype=torch.float32, **kw)
            return model.to(self.device).eval()

        self.target, self.draft = load(case.target), load(case.draft)
        self.ids = self.tensor([case.prompt])
        # the warm cache for step and verify: prompt[:-1], cropped back after every call
        self.cache = DynamicCache(config=self.target.config)
        self.target(self.ids[:, :-1], past_key_values=self.cache, use_cache=True)

    def config(self, n, temperature=0.0):
        # sampling from the whole distribution: transformers' default top_k of 50 is switched off
        sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
        return self.generation_config(
            max_new_tokens=n, eos_token_id=None, pad_token_id=0,
            **(sampling if temperature > 0 else dict(do_sample=False)),
        )  # fmt: skip

    def tensor(self, ids):
        return self.torch.tensor(ids, device=self.device)

    def draft_step(self):
        pass  # not timed: c is tinygrad's

    def generate(self, prompt, n, temperature, seed, assistant=None):
        self.torch.manual_seed(seed)
        ids = self.tensor([prompt])
        config = self.config(n, temperature)
        out = self.target.generate(ids, generation_config=config, assistant_model=assistant)
        return Made(out[0, len(prompt) :].tolist())

    def plain(self, prompt, n, temperature, seed):
        return self.generate(prompt, n, temperature, seed)

    def spec(self, prompt, n, k, temperature, seed):
        self.drafting(k)
        return self.generate(prompt, n, temperature, seed, assistant=self.draft)

    def drafting(self, k):
        # the candidate generator reads these from the draft's own generation config: K drafts
        # every round, as specmini.generate, and no early stop on the draft's confidence
        drafting = self.draft.generation_config
        drafting.num_assistant_tokens, drafting.num_assistant_tokens_schedule = k, "constant"
        drafting.assistant_confidence_threshold = 0

    def reset(self):
        pass

    def forward(self, ids):
        out = self.target(ids, past_key_values=self.cache, use_cache=True).logits
        self.cache.crop(-ids.shape[1])  # transformers 5: a negative count of tokens to drop
        return out.cpu()  # waits for the GPU, as tinygrad's read of the logits does

    def step(self):
        self.forward(self.ids[:, -1:])

    def verify(self, k):
        self.forward(self.tensor([self.prompt[-1:] + self.prompt[:k]]))

    def greedy(self, n):
        out = self.target.generate(self.ids, generation_config=self.config(n))
        return out[0, len(self.prompt) :].tolist(), None

    def speculative(self, n, k):
        self.drafting(k)
        out = self.target.generate(
            self.ids, generation_config=self.config(n), assistant_model=self.draft
        )
        return out[0, len(self.prompt) :].tolist(), None

    def kernels(self):
        return None


@dataclass
class Made:
    """transformers' new tokens, shaped like specmini's Generation for the race."""

    tokens: list


def torch_available():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


# ---------- measuring ----------


def repeats_for(call):
    """How many calls make one sample: fast calls are averaged so the timer's noise stays small."""
    return max(1, min(20, round(SAMPLE_S / seconds(call))))


def warm_up(peer, case, k, ks):
    """The cold calls: tinygrad captures and compiles its JIT graphs here (compile_s)."""
    start = time.perf_counter()
    first_step = seconds(peer.step)
    for _ in range(2):  # TinyJit runs a call once, captures it on the second, replays after
        peer.step()
        for kk in ks:  # gpt2.py may compile one graph per size of call
            peer.verify(kk)
    peer.greedy(min(case.new_tokens, 4))
    peer.speculative(min(case.new_tokens, 2 * k + 2), k)
    return {"compile_s": time.perf_counter() - start, "first_step_s": first_step}


def measure(peers, case, k):
    """All timings, the peers alternating inside every repetition; and the tokens they made."""
    progress(f"{case.name}: warming up (tinygrad compiles its JIT graphs)")
    cold = {p.name: warm_up(p, case, k, case.ks) for p in peers}
    repeat = {p.name: repeats_for(p.step) for p in peers}
    times = {p.name: {} for p in peers}
    tokens, spec_stats = [], {}

    def sample(peer, key, call, repeat=1):
        times[peer.name].setdefault(key, []).append(seconds(call, repeat))

    for rep in range(case.reps):
        progress(f"{case.name}: repetition {rep + 1} of {case.reps}")
        for p in peers:
            sample(p, "step", p.step, repeat[p.name])
            sample(p, "draft_step", p.draft_step, repeat[p.name])
        for kk in case.ks:
            for p in peers:
                sample(p, f"verify{kk}", lambda p=p, kk=kk: p.verify(kk), repeat[p.name])
        for mode in ("greedy", "speculative"):
            for p in peers:
                start = time.perf_counter()
                made, stats = (
                    p.greedy(case.new_tokens)
                    if mode == "greedy"
                    else p.speculative(case.new_tokens, k)
                )
                times[p.name].setdefault(mode, []).append(time.perf_counter() - start)
                tokens.append({"framework": p.name, "mode": mode, "rep": rep, "tokens": made})
                if stats:
                    spec_stats[p.name] = stats
    return cold, repeat, times, tokens, spec_stats


def race_pair(peers, case, ks, temperatures):
    """End to end, per temperature: each framework's target alone and speculative decoding at
    every K in ks, racing on the case's prompts (course.timing.race: all take turns inside every
    repetition). Seconds per token, speed-ups over the same framework's target alone, alpha (the
    share of accept tests passed, tinygrad's rounds), and at temperature 0 whether every
    speculative text equals its target's greedy one, and how much that text repeats itself."""
    out, n = {}, case.new_tokens
    for t in temperatures:
        runs = {}
        for p in peers:
            runs[f"{p.name} plain"] = lambda prompt, seed, p=p, t=t: p.plain(prompt, n, t, seed)
            for k in ks:
                runs[f"{p.name} K={k}"] = lambda prompt, seed, p=p, k=k, t=t: p.spec(
                    prompt, n, k, t, seed
                )
        progress(f"{case.name}: racing end to end at temperature {t}, {len(runs)} runs")
        summary, last = timing.race(runs, case.prompts, peers, case.reps)
        n_prompts = len(case.prompts)
        r = {
            "s_per_token": summary,
            "speedup": {
                p.name: {
                    k: speedup.speedups(summary, f"{p.name} plain", f"{p.name} K={k}") for k in ks
                }
                for p in peers
            },  # fmt: skip
            "alpha": {
                k: speedup.alpha_of([last[f"tinygrad K={k}", i] for i in range(n_prompts)])
                for k in ks
            },
        }
        r["alpha_all"] = speedup.alpha_of(
            [last[f"tinygrad K={k}", i] for k in ks for i in range(n_prompts)]
        )
        if t == 0:
            plain = [last["tinygrad plain", i].tokens for i in range(n_prompts)]
            r["greedy_identical"] = {  # each run's texts against tinygrad's target alone
                name: all(last[name, i].tokens == plain[i] for i in range(n_prompts))
                for name in runs
            }
            r["greedy_repeated_16grams"] = [speedup.repeated_share(tokens) for tokens in plain]
            r["greedy_texts"] = [bytes(tokens).decode("utf-8", "replace") for tokens in plain]
        out[str(t)] = r
    return out


def predictions(report, race):
    """Notebook 05's refined formula on tinygrad's measured costs: c (draft step / target step),
    v_K (verify K / step) and each temperature's alpha; the K it chooses; against the race."""
    tiny = report["frameworks"]["tinygrad"]
    c = tiny["draft_step_ms"]["median"] / tiny["step_ms"]["median"]
    v = {int(k): x["ratio_median"] for k, x in tiny["verify"].items()}
    out = {"c": c, "v": v}
    for t, r in race.items():
        alpha = r["alpha_all"]
        ks = [int(k) for k in r["speedup"]["tinygrad"] if int(k) in v]
        out[t] = {
            "alpha": alpha,
            "predicted": {k: speedup.refined_speedup(alpha, k, c, v[k]) for k in ks},
            "measured_median": {k: r["speedup"]["tinygrad"][k]["median"] for k in ks},
            "chosen_k": speedup.choose_k(alpha, c, {k: v[k] for k in ks})[0],
        }
    return out


def progress(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def compare_tokens(runs):
    """Every run's tokens against tinygrad's first greedy run: the mismatches, if any."""
    reference = runs[0]["tokens"]
    bad = []
    for run in runs:
        same = first_difference(run["tokens"], reference)
        if same is not None:
            bad.append({k: run[k] for k in ("framework", "mode", "rep")} | {"first_diff": same})
    return reference, bad


# ---------- the memory-bandwidth floor ----------


def numpy_copy_bandwidth(megabytes, tries):
    """Bytes moved per second (read + write, as STREAM's copy counts them) by np.copyto."""
    src = np.ones(megabytes * 2**20 // 8)
    dst = np.zeros_like(src)
    best = min(seconds(lambda: np.copyto(dst, src)) for _ in range(tries))
    return 2 * src.nbytes / best


def tinygrad_copy_bandwidth(megabytes, tries):
    """The same on tinygrad's device, with its threads: the memory the model's kernels read."""
    n = megabytes * 2**20 // 4
    src = Tensor.ones(n).contiguous().realize()
    dst = Tensor.zeros(n).contiguous().realize()

    def copy():
        dst.assign(src + 1).realize()  # + 1: a real kernel that reads and writes every element
        Device[Device.DEFAULT].synchronize()

    copy()
    best = min(seconds(copy) for _ in range(tries))
    return 2 * n * 4 / best


def bandwidth(fast):
    megabytes, tries = (32, 2) if fast else (256, 5)  # fast: a smoke test, not a number
    out = {"numpy_copy_GBps": numpy_copy_bandwidth(megabytes, tries) / 1e9, "array_MB": megabytes}
    try:
        out["tinygrad_copy_GBps"] = tinygrad_copy_bandwidth(megabytes, tries) / 1e9
    except Exception as e:  # a floor from numpy alone still says something
        out["tinygrad_error"] = repr(e)
    on_host = Device.DEFAULT in ("CPU", "CLANG", "LLVM")
    candidates = [out.get("tinygrad_copy_GBps", 0)] + ([out["numpy_copy_GBps"]] if on_host else [])
    out["floor_GBps"] = max(candidates) or out["numpy_copy_GBps"]
    return out


# ---------- the machine ----------


def gpu_name():
    try:
        query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def versions(with_torch):
    names = ("numpy", "tinygrad") + (("torch", "transformers") if with_torch else ())
    return {"python": platform.python_version()} | {n: metadata.version(n) for n in names}


def git_commit():
    try:
        cmd = ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def device_info():
    gpu = gpu_name() if Device.DEFAULT not in ("CPU", "CLANG", "LLVM") else None
    return {
        "tinygrad_device": Device.DEFAULT,
        "cpu": cpu_model(),
        "gpu": gpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
    }


def device_tag(info):
    """A file-name-safe name for the device that made the results: cpu-amd-epyc, cuda-..."""
    name = info["gpu"] or info["cpu"]
    return re.sub(r"[^a-z0-9]+", "-", f"{info['tinygrad_device']}-{name}".lower()).strip("-")


# ---------- the report ----------


def model_report(case, peers, k, cold, repeat, times, tokens, spec_stats, floor_GBps):
    params = checkpoints.read_config(case.target / "config.json").parameters
    weight_bytes = params * 4  # float32 on both sides
    floor_ms = weight_bytes / (floor_GBps * 1e9) * 1e3
    reference, mismatches = compare_tokens(tokens)
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
        "k": k,
        "verify_ks": list(case.ks),
        "reps": case.reps,
        "tokens": reference,
        "tokens_identical": not mismatches,
        "mismatches": mismatches,
        "frameworks": {},
    }
    for p in peers:
        t = times[p.name]
        step = min_median([s * 1e3 for s in t["step"]])
        r = {**cold[p.name], "calls_per_sample": repeat[p.name], "step_ms": step}
        r["step_over_floor"] = step["median"] / floor_ms
        if p.name == "tinygrad":
            r["draft_step_ms"] = min_median([s * 1e3 for s in t["draft_step"]])
        r["verify"] = {}
        for kk in case.ks:
            v = min_median([s * 1e3 for s in t[f"verify{kk}"]])
            v["ratio_median"] = v["median"] / step["median"]
            v["ratio_min"] = v["min"] / step["min"]
            r["verify"][kk] = v
        for mode in ("greedy", "speculative"):
            s = min_median(t[mode])
            r[mode] = {
                "seconds": s,
                "tokens_per_s_best": case.new_tokens / s["min"],
                "tokens_per_s_median": case.new_tokens / s["median"],
            }
        r["speculative"]["stats"] = spec_stats.get(p.name)
        r["speedup_best"] = r["speculative"]["tokens_per_s_best"] / r["greedy"]["tokens_per_s_best"]
        r["speedup_median"] = (
            r["speculative"]["tokens_per_s_median"] / r["greedy"]["tokens_per_s_median"]
        )
        r["kernels"] = p.kernels()
        out["frameworks"][p.name] = r
    return out


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
    for kk in m["verify_ks"]:
        row(
            f"verify K={kk} / step",
            lambda r, kk=kk: (r["verify"][kk]["ratio_min"], r["verify"][kk]["ratio_median"]),
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
                f"   {n} speculative: acceptance {stats['acceptance']:.2f}, "
                f"{stats['target_calls']} target calls for {m['new_tokens']} tokens"
            )
        if r["kernels"]:
            kernels = r["kernels"]
            counted = ", ".join(
                f"{c} {v} ({kernels['per_block'][c]:.1f}/block)"
                for c, v in kernels["counted"].items()
            )
            lines.append(f"   {n} kernels per call: {counted}")
            reported = kernels["gpt2_kernel_counts"]
            lines.append(f"   gpt2.kernel_counts: {reported}")
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
            f"   temperature {t}: alpha {p['alpha']:.3f}, refined formula's K {p['chosen_k']}"
        )
        for name, x in r["s_per_token"].items():
            fw, _, kind = name.partition(" ")
            extra = ""
            if kind != "plain":
                k = int(kind[2:])
                extra = f"  speed-up {r['speedup'][fw][k]['median']:.2f}"
                if fw == "tinygrad":
                    extra += f" (predicted {p['predicted'][k]:.2f})"
            lines.append(f"     {name:18} {x['min'] * 1e3:7.3f} {x['median'] * 1e3:7.3f}{extra}")
        if "greedy_identical" in r:
            same = all(r["greedy_identical"][n] for n in r["greedy_identical"] if "tinygrad" in n)
            lines.append(
                f"     greedy: speculative = target alone (tinygrad, every K): {same}; "
                f"transformers' greedy the same: {r['greedy_identical'].get('transformers plain')}"
                f"; repeated 16-grams {[round(x, 2) for x in r['greedy_repeated_16grams']]}"
            )
    return lines


# ---------- running it ----------


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.decode", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--models", default="pair,small", help="comma-separated: pair, small, medium")
    ap.add_argument("--reps", type=int, default=0, help="repetitions (default: by model size)")
    ap.add_argument(
        "--tokens", type=int, default=0, help="new tokens end to end (default: by model)"
    )
    ap.add_argument("--k", type=int, default=4, help="drafts per round, end to end")
    ap.add_argument("--no-torch", action="store_true", help="tinygrad only")
    ap.add_argument("--torch-threads", type=int, default=0, help="default: tinygrad's count")
    ap.add_argument(
        "--fast", action="store_true", help="CI: tinygrad, offline pair, 8 tokens, 2 reps"
    )
    ap.add_argument(
        "--beam",
        type=int,
        default=0,
        help="tinygrad's kernel search width (default 0: the course's kernels, no search)",
    )
    ap.add_argument("--out", type=pathlib.Path, help="JSON path (default: benchmarks/results/tmp/)")
    ap.add_argument("--save", action="store_true", help="write to benchmarks/results/ to commit")
    args = ap.parse_args(argv)
    if args.fast:
        args.models, args.no_torch = "pair", True
        args.reps, args.tokens = args.reps or 2, args.tokens or 8
    return args


def output_path(args, tag, now):
    if args.out:
        return args.out
    if args.save:
        return RESULTS / f"{tag}-{now:%Y-%m-%d}.json"
    return SCRATCH / f"{tag}-{now:%Y-%m-%d-%H%M%S}.json"


def main(argv=None):
    args = parse(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = set(names) - {"pair", *SHAPES}
    if unknown:
        sys.exit(f"unknown models {sorted(unknown)}: choose from pair, small, medium")
    with_torch = not args.no_torch and torch_available()
    if not args.no_torch and not with_torch:
        print("transformers peer skipped: pip install -r requirements-bench.txt (see its header)")
    threads = NUM_CPU_THREADS.value
    now = datetime.datetime.now()
    info = device_info()
    result = {
        "command": "python -m benchmarks.decode "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": now.isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "device": info,
        "versions": versions(with_torch),
        "threads": {"tinygrad_NUM_CPU_THREADS": threads},
        # tinygrad's settings that change its kernels: a BEAM-searched run is not a plain one
        "tinygrad_env": {k: os.environ[k] for k in TINYGRAD_ENV if k in os.environ},
        "tinygrad_beam": args.beam,
        "tinygrad_runtime": runtime.name(),  # HCQ2 or default (course/runtime.py)
        "load_before": os.getloadavg(),
        "fast": args.fast,
    }
    if with_torch:  # the same threads for both: 2 cores here, shared by the two frameworks
        import torch

        torch.set_num_threads(args.torch_threads or threads)
        result["threads"]["torch"] = torch.get_num_threads()
        result["torch_device"] = "cuda" if info["gpu"] and torch.cuda.is_available() else "cpu"
    result["bandwidth"] = bandwidth(args.fast)
    result["models"] = {}
    with tempfile.TemporaryDirectory(prefix="specmini-bench-") as scratch:
        for name in names:
            progress(f"{name}: writing and loading the weights")
            prompt_len = FAST_PROMPT_LEN if args.fast else PROMPT_LEN
            case = make_case(name, pathlib.Path(scratch), args.reps, args.tokens, prompt_len)
            case.ks = FAST_KS if args.fast else KS
            peers = [Tinygrad(case, args.beam)] + ([Transformers(case)] if with_torch else [])
            measured = measure(peers, case, args.k)
            report = model_report(case, peers, args.k, *measured, result["bandwidth"]["floor_GBps"])
            if name == "pair":
                ks = FAST_KS[1:] if args.fast else SPEC_KS
                case.prompts = case.prompts[:1] if args.fast else case.prompts
                report["race"] = race_pair(peers, case, ks, TEMPERATURES)
                report["race_prompts"] = [bytes(p).decode("utf-8", "replace") for p in case.prompts]
                report["predictions"] = predictions(report, report["race"])
            result["models"][name] = report
            print(table(name, report), flush=True)
            del peers  # free GPT-2 medium's weights before the next model
    result["load_after"] = os.getloadavg()
    result["tokens_identical"] = all(m["tokens_identical"] for m in result["models"].values())
    print_footer(result)
    path = output_path(args, device_tag(info), now)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    return result


def print_footer(result):
    bw, device = result["bandwidth"], result["device"]
    print(
        f"device {device['tinygrad_device']} ({device['gpu'] or device['cpu']}), "
        f"threads {result['threads']}, copy bandwidth numpy {fmt(bw['numpy_copy_GBps'])} GB/s, "
        f"tinygrad {fmt(bw.get('tinygrad_copy_GBps'))} GB/s; load average "
        f"{fmt(result['load_before'][0])} before, {fmt(result['load_after'][0])} after"
    )
    if not result["tokens_identical"]:
        print("!!! TOKENS DIFFER between runs: see 'mismatches' in the JSON !!!")


if __name__ == "__main__":
    main()
