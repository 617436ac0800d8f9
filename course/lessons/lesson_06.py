"""The longer code of notebooks 06 and 06b (GPT-2 in tinygrad, and where speculative decoding
pays): loading the models, the greedy-identity check, acceptance measured along a text (and a
gain in it with a bootstrap interval), the live view behind the sliders, the offline pair's
training record; what a call costs and the two figures about it (06b). The notebooks show the
calls and what they print. No exercise solution lives here."""

import ast
import functools
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

import specmini
from course import checkpoints, gpt2, timing, tokenizers
from course.display import show_rounds, slider, slider_panel
from course.figures import save
from course.toys import accept_tests, first_difference, pass_rate

from tinygrad import Tensor

# ---------- the models ----------


def load_pair(models, on_gpu, offline_dir, target_buckets=gpt2.CALLS["lesson"]):
    """(target, draft, tokenizer, name). models: "auto" = real GPT-2 when its weights can be had
    (downloaded or cached), the offline pair otherwise; "gpt2" = real GPT-2 or an error;
    "offline" = never use the network. `target_buckets`: the target's compiled calls."""
    if models != "offline":
        try:
            tokenizer = tokenizers.gpt2_tokenizer()  # tiktoken's GPT-2 BPE
            target_name = "gpt2-xl" if on_gpu else "gpt2-medium"
            # fp16 on a GPU: half the memory
            target = checkpoints.load(target_name, half=on_gpu, buckets=target_buckets)
            draft = checkpoints.load("gpt2", half=on_gpu, buckets=gpt2.CALLS["draft"])
            return target, draft, tokenizer, f"{target_name} + gpt2"
        except ConnectionError:
            if models == "gpt2":
                raise
            print("GPT-2's files could not be downloaded (offline?): using the offline pair.")
    target, draft = (
        checkpoints.load(Path(offline_dir) / "pytarget", buckets=target_buckets),
        checkpoints.load(Path(offline_dir) / "pydraft", buckets=gpt2.CALLS["draft"]),
    )
    return target, draft, tokenizers.ByteTokenizer(), "the offline pair (pytarget + pydraft)"


# ---------- greedy identity, within the numbers' rounding ----------

# A logit gap below this fraction of the row's largest |logit| is a near-tie that rounding can
# flip: fp16 keeps 11 significant bits (2^-11 = 5e-4 per operation), and a logit sums thousands
# of products over dozens of layers; fp32 keeps 24 (6e-8), so 1e-4 leaves a wide margin.
RELATIVE_TOLERANCE = {"fp16": 1e-2, "fp32": 1e-4}


def greedy_identity(target, prompt, speculative, plain, tolerance, decode=str):
    """Compare a speculative greedy output with the target-only one, token for token.

    Passes if they are identical, or if they first differ where the target's two best tokens are
    a near-tie (their logit gap at most `tolerance` times the row's largest |logit|, at least 1)
    and the two outputs took exactly those two tokens: rounding may flip such a tie, and the texts
    then part ways. Any other difference is a wrong token. Prints the verdict; returns a dict."""
    target.reset()  # the target's logits behind each token of `plain`, from one fresh pass
    rows = np.asarray(target(list(prompt) + list(plain), len(prompt) - 1)[:-1], dtype=np.float64)
    top2 = np.argsort(-rows, axis=-1)[:, :2]
    gaps = np.take_along_axis(rows, top2, -1) @ np.array([1.0, -1.0])
    limits = tolerance * np.maximum(1.0, np.abs(rows).max(-1))
    i = first_difference(speculative, plain)
    if i is None:
        j = int(np.argmin(gaps / limits))
        print(
            f"identical: all {len(plain)} tokens; every top-2 logit gap at least "
            f"{at_least(gaps[j])} (near-tie limit: {tolerance:g} of the row's largest logit)"
        )
        return dict(passed=True, identical=True, at=None, gap=None, limit=None)
    if i == min(len(speculative), len(plain)):  # one output is a prefix of the other
        print(f"one output stops after {i} tokens, the other goes on")
        return dict(passed=False, identical=False, at=i, gap=None, limit=None)
    tied = gaps[i] <= limits[i] and {speculative[i], plain[i]} == {int(t) for t in top2[i]}
    ours, theirs = decode(speculative[i]), decode(plain[i])
    print(f"first difference at new token {i}: speculative {ours!r}, target-only {theirs!r}")
    gap = f"at least {at_least(gaps[i])}" if gaps[i] > limits[i] else "within the near-tie limit"
    print(f"the target's top-2 logit gap there: {gap}")
    print("a near-tie flipped by rounding: both are the target's greedy text" if tied
          else "not a near-tie: a wrong token")  # fmt: skip
    return dict(
        passed=bool(tied), identical=False, at=i, gap=float(gaps[i]), limit=float(limits[i])
    )


def at_least(x):
    """A lower bound on x > 0, to one significant digit, that last-bit rounding cannot move: the
    stored outputs then read the same on every machine (0.0437 -> "0.04", 0.5 -> "0.4")."""
    digits = -int(np.floor(np.log10(0.99 * x)))
    return f"{np.floor(0.99 * x * 10**digits) / 10**digits:.{max(digits, 0)}f}"


class KeepsFirstDraft:
    """A deliberately broken target for specmini: in every verification pass the row that tests
    the first draft is changed to agree with it, so each round keeps its first draft without the
    target's check. Only for showing that the identity check can fail."""

    def __init__(self, target):
        self.target = target

    def __call__(self, tokens, start):
        rows = np.array(self.target(tokens, start))
        if len(rows) > 1:  # a verification pass: row 0 scores the first draft, tokens[start + 1]
            rows[0, tokens[start + 1]] = rows[0].max() + 1.0
        return rows


# ---------- acceptance ----------


def pass_rate_and_alpha(target, draft, prompt, temperature, new_tokens, k, seed=0):
    """Generate speculatively; measure the pass rate of its accept tests, and alpha computed from
    both models' full distributions at every position of the generated text."""
    g = specmini.generate(
        target, draft, prompt, new_tokens, k=k, temperature=temperature, seed=seed
    )
    passed, tests = accept_tests(g)
    text = list(prompt) + g.tokens
    target.reset(), draft.reset()
    t = specmini.probabilities(target(text, len(prompt) - 1)[:-1], temperature)
    d = specmini.probabilities(draft(text, len(prompt) - 1)[:-1], temperature)
    return dict(
        generation=g,
        passed=passed,
        tests=tests,
        pass_rate=pass_rate(g),
        alpha=float(specmini.acceptance_rate(t, d).mean()),
        per_call=len(g.tokens) / len(g.rounds),
    )


# Two held-out texts for the offline pair, written for this notebook (neither is in the Python
# standard library the pair was trained on): Python code, and English prose of about equal length.
CODE_TEXT = '''def moving_average(values, width):
    """Return the mean of each run of `width` values in a row."""
    if width <= 0:
        raise ValueError("width must be positive")
    result = []
    total = 0
    for i, value in enumerate(values):
        total += value
        if i >= width:
            total -= values[i - width]
        if i >= width - 1:
            result.append(total / width)
    return result


class Tally:
    def __init__(self):
        self.counts = {}

    def add(self, key):
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.counts[key]
'''
PROSE_TEXT = (
    "On the first cold morning of autumn the river was hidden under a low white fog, and the only "
    "sound was the slow creak of a boat somewhere near the far bank. My grandmother walked ahead "
    "of me with her hands in her pockets, stopping now and then to point at a heron or at an apple "
    "that had fallen into the grass. She said that every year the water forgot the summer a little "
    "sooner, and that this was why old people liked to get up early: to see the fog before it, "
    "too, was gone. We walked as far as the old mill and back, and neither of us said much more."
)


def is_python(text):
    """True if `text` parses as Python source."""
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def along_text(target, draft, tokens, window=64):
    """Both models read `tokens` itself (not text they generate). For every position p, with up
    to `window` to 2 * window - 1 tokens of context: alpha = sum(min(target, draft)) of their
    distributions of token p + 1 at temperature 1 and 0, and the target's log-probability of the
    real token p + 1. One row per position, len(tokens) - 1 in all."""
    alphas = {1.0: [], 0.0: []}
    logprobs = []
    for w in range(0, len(tokens) - 1, window):
        lo, end = max(0, w - window), min(w + window, len(tokens) - 1)
        context = tokens[lo:end]  # row j scores token w + j + 1
        target.reset(), draft.reset()
        t, d = target(context, w - lo), draft(context, w - lo)
        for temperature, rows in alphas.items():
            probs = [specmini.probabilities(x, temperature) for x in (t, d)]
            rows.append(specmini.acceptance_rate(*probs))
        logp = t - t.max(-1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
        logprobs.append(logp[np.arange(end - w), tokens[w + 1 : end + 1]])
    alphas = {temperature: np.concatenate(rows) for temperature, rows in alphas.items()}
    return alphas, np.concatenate(logprobs)


def plot_alpha_along(along, window=64):
    """Alpha along a text for each draft ({name: {temperature: alpha at every position}}), as a
    moving average over `window` positions, one panel per temperature."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, t in zip(axes, (1.0, 0.0), strict=True):
        for name, alphas in along.items():
            a = np.asarray(alphas[t])
            smooth = np.convolve(a, np.ones(window) / window, mode="valid")
            ax.plot(np.arange(len(smooth)) + window // 2, smooth, label=f"{name} ({a.mean():.3f})")
        ax.set(title=f"temperature {t:g}", xlabel="position in the held-out text",
               ylabel=f"alpha, mean over {window} positions")  # fmt: skip
        ax.legend(title="draft (mean alpha)", fontsize=8)
    fig.suptitle("How often each draft's token would pass, along held-out code")
    fig.tight_layout()
    return fig


def gain_interval(better, worse, level=0.95, block=32, resamples=2000, seed=0):
    """(gain, low, high): the mean over positions of better - worse, two values per position of
    one text (alpha of two drafts along it, say), and a `level` bootstrap interval for it.
    Neighbouring positions are not independent, so the bootstrap resamples blocks of `block`
    consecutive positions, with replacement, until it has as many positions as the text (a
    moving-block bootstrap; block = 1 resamples single positions), `resamples` times with a
    fixed seed, and takes the middle `level` of the resampled means. Both drafts are resampled
    at the same positions: what makes a position easy or hard for both cancels out."""
    diff = np.asarray(better, dtype=float) - np.asarray(worse, dtype=float)
    if diff.ndim != 1 or len(diff) < 2 or not 0 < level < 1 or block < 1:
        raise ValueError("two equal-length 1-D arrays of 2 or more values, 0 < level < 1")
    n, block = len(diff), min(int(block), len(diff))
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, n - block + 1, size=(resamples, -(-n // block)))
    picks = (starts[:, :, None] + np.arange(block)).reshape(resamples, -1)[:, :n]
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(diff[picks].mean(axis=1), [tail, 100 - tail])
    return float(diff.mean()), float(low), float(high)


def from_prompts_in(target, draft, tokens, k, new_tokens=16, prompt_len=64, temperature=1.0):
    """Speculative sampling from prompts cut out of `tokens` (the `prompt_len` tokens before each
    multiple of prompt_len): the pass rate of their accept tests, tokens per target call."""
    ends = range(prompt_len, len(tokens) - new_tokens + 1, prompt_len)
    generate = functools.partial(specmini.generate, target, draft, k=k, temperature=temperature)
    runs = [generate(tokens[end - prompt_len : end], new_tokens, seed=end) for end in ends]
    per_call = sum(len(g.tokens) for g in runs) / sum(len(g.rounds) for g in runs)
    return dict(pass_rate=pass_rate(runs), per_call=per_call, prompts=len(ends))


def text_acceptance(target, draft, texts, encode, k):
    """For each named text: alpha along it at temperature 1 and 0, the target's loss on it, the
    tokens per call the formula expects from alpha, and what sampling from its prompts gave."""
    rows = {}
    for name, text in texts.items():
        tokens = encode(text)
        alphas, logp = along_text(target, draft, tokens)
        rows[name] = dict(
            tokens=len(tokens),
            positions=len(alphas[1.0]),
            loss=float(-logp.mean()),
            alpha=float(alphas[1.0].mean()),
            alpha_greedy=float(alphas[0.0].mean()),
            expected=specmini.expected_tokens(float(alphas[1.0].mean()), k),
            **from_prompts_in(target, draft, tokens, k),
        )
    head = "bytes  target loss  alpha T=1  alpha T=0  E[tokens] | sampled: pass rate  tokens/call"
    print(" " * 6 + head)
    for name, r in rows.items():
        measured = f"{r['alpha']:9.3f}  {r['alpha_greedy']:9.3f}  {r['expected']:9.2f}"
        sampled = f"{r['pass_rate']:17.3f}  {r['per_call']:11.2f}"
        print(f"{name:6}{r['tokens']:5}  {r['loss']:11.3f}  {measured} | {sampled}")
    return rows


# ---------- the live view ----------


def live_generation(target, draft, prompt, decode, K, temperature, new_tokens=48):
    """Decode `new_tokens` speculatively, colour them, and say how the accept tests went."""
    g = specmini.generate(target, draft, prompt, new_tokens, k=K, temperature=temperature, seed=0)
    display(show_rounds(g, decode=decode))
    passed, tests = accept_tests(g)
    print(
        f"K = {K}, temperature = {temperature:.1f}: {passed} of {tests} accept tests passed, "
        f"{len(g.tokens)} tokens in {len(g.rounds)} target calls "
        f"({len(g.tokens) / len(g.rounds):.2f} per call)"
    )
    return g


def sliders(live, k=4, temperature=0.8):
    """K and temperature sliders driving live(K=..., temperature=...)."""
    controls = {
        "K": slider("K", k, 1, 8),
        "temperature": slider("temperature", temperature, 0.0, 2.0, 0.1),
    }
    return slider_panel(live, controls)


# ---------- what a call costs ----------


def random_gpt2(n_layer, like, buckets=(1,)):
    """A GPT-2 as wide as `like` (a GPT2) with n_layer blocks and random weights: it takes a
    trained model's time per call (the same kernels, the same bytes), and its outputs are noise."""
    cfg = like.config
    shape = gpt2.Config(vocab_size=cfg.vocab_size, n_positions=cfg.n_positions,
                        n_embd=cfg.n_embd, n_layer=n_layer, n_head=cfg.n_head)  # fmt: skip
    model, rng = gpt2.GPT2(shape, buckets=buckets), np.random.default_rng(0)
    # the matrices drawn by numpy: seconds faster than tinygrad's random kernels for 12 blocks
    for t in [t for t in gpt2.weights(model).values() if t.ndim == 2]:
        t.replace(Tensor(rng.normal(0, 0.02, t.shape).astype(np.float32), device=t.device))
    return model


def weight_megabytes(model):
    """What a step reads: the model's weights, in MB as stored in memory (fp32: 4 bytes each)."""
    return checkpoints.parameter_count(model) * model.wte.weight.dtype.itemsize / 1e6


def call_costs(models, text, at, news, repeat=15):
    """ms of each model's call over n new tokens against a warm cache of `at` positions, for n in
    `news`: {name: {n: ms}}, the fastest of `repeat`. The calls take turns (so the machine's load
    weighs on all alike), and each timed call comes right after an untimed one of the same call:
    it finds the model's weights wherever a run of its own calls leaves them, in the CPU's cache
    if they fit, not where another model's calls pushed them."""
    calls = {(name, n): (lambda m=m, n=n: m(text[: at + n], at))
             for name, m in models.items() for n in news}  # fmt: skip
    best = timing.fastest(calls, repeat, warm_up="each")  # the first untimed call compiles
    return {name: {n: 1000 * best[name, n] for n in news} for name in models}


def plot_regime(sizes_mb, step_ms, per_token, cache_mb, machine, precision="fp32", path=None):
    """The figure on where speculative decoding pays. Left: a one-token step's time against the
    weights it reads, with the CPU's last-level cache marked. Right: a call over n new tokens, in
    steps of the same model, for each model in `per_token` ({label: {n: ms}})."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    label = "one-token step (random weights; the last: the target)"
    left.plot(sizes_mb, step_ms, "o-", color="tab:blue", label=label)
    # a step that only reads its weights lies on a line from 0: points under it read faster
    rate = "the target's rate, from 0 (a step that is a read of its weights)"
    left.plot([0, sizes_mb[-1]], [0, step_ms[-1]], ":", color="tab:blue", label=rate)
    if cache_mb:
        left.axvline(cache_mb, color="grey", ls="--", label=f"last-level cache ({cache_mb:.1f} MB)")
    left.set(title="A step's time against the weights it reads", ylabel="fastest step (ms)",
             xlabel=f"weights (MB, {precision})", xlim=(0, None), ylim=(0, None))  # fmt: skip
    left.legend()
    for (label, ms), colour in zip(per_token.items(), ("tab:orange", "tab:green"), strict=False):
        news = sorted(ms)
        right.plot(news, [ms[n] / ms[1] for n in news], "o-", color=colour, label=label)
    news = sorted(next(iter(per_token.values())))
    right.plot(news, news, ":", color="grey", label="n one-token steps")
    right.axhline(1, color="grey", lw=0.8)
    right.set(title="A call over n new tokens, in steps", xlabel="new tokens in one call (K + 1)",
              ylabel="time / one-token step", ylim=(0, None))  # fmt: skip
    right.legend()
    fig.suptitle(f"Measured on a {machine}")
    fig.tight_layout()
    return save(fig, path) if path else fig


def plot_round_costs(raced, machine, path=None):
    """Where a round's time goes, in the race's target steps: the draft's calls (K c), the
    verification pass (v_K) and the time outside the models (o_K), beside the target alone's time
    for the tokens that a round made (one step and o_0 per token). `raced`: temperature -> the
    race's record (k, per_round, paid: c, v, o_k, o_0)."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels, x = [], 0
    for t, r in sorted(raced.items()):
        paid, k, tokens = r["paid"], r["k"], r["per_round"]
        parts = [
            (k * paid["c"], "draft calls (K c)", "tab:orange"),
            (paid["v"], "verification pass (v_K)", "tab:blue"),
            (paid["o_k"], "outside the models (o_K)", "tab:grey"),
        ]
        alone = [
            (tokens, "target alone: one step a token", "tab:green"),
            (tokens * paid["o_0"], "target alone: outside the models", "lightgrey"),
        ]
        for bar, stack in ((x, parts), (x + 1, alone)):
            bottom = 0.0
            for height, label, colour in stack:
                shown = label if label not in ax.get_legend_handles_labels()[1] else None
                ax.bar(bar, height, bottom=bottom, color=colour, label=shown, width=0.8)
                bottom += height
        labels += [f"speculative\n(T = {t:g}, K = {k})", f"target alone\n({tokens:.2f} tokens)"]
        x += 3
    ax.set_xticks([i for j in range(0, x, 3) for i in (j, j + 1)], labels, fontsize=9)
    ax.set(title=f"A round against the target alone, for the same tokens\n({machine})",
           ylabel="time (target steps of the race)")  # fmt: skip
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return save(fig, path) if path else fig


# ---------- the offline pair's record ----------


def training_summary(offline_dir):
    """What models/*/training.json records: size, shape, bytes seen, losses, the corpus."""
    for name in ("pytarget", "pydraft", "pydraft-data"):
        record = json.loads((Path(offline_dir) / name / "training.json").read_text())
        size = (Path(offline_dir) / name / "model.safetensors").stat().st_size / 2**20
        losses, cfg, tr = record["final_losses_nats_per_byte"], record["config"], record["training"]
        print(
            f"{name:12} {record['parameters']:9,} parameters ({size:.2f} MiB on disk): "
            f"n_layer {cfg['n_layer']}, n_embd {cfg['n_embd']}; {tr['tokens_seen']:,} bytes seen "
            f"in {tr['seconds'] / 60:.0f} min; loss {losses['train']:.3f} train, "
            f"{losses['validation']:.3f} validation (nats/byte)"
        )
        print(f"{'':12} {tr['objective']}")
    corpus = record["corpus"]
    print(
        f"corpus: {corpus['files']} files of Python {corpus['python']}'s standard library, "
        f"{corpus['train_bytes']:,} bytes for training, {corpus['val_bytes']:,} held out"
    )
