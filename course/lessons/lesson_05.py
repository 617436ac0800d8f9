"""The longer code of notebook 05 (the speed-up, the best K, and when it pays off): its plots,
the live rounds behind the sliders, and the lossy U[0, b] accept rule. The notebook shows the
calls and the pictures. Its plot helpers return their figure; the live views (live_rounds,
lossy_rounds) show theirs, as they run inside a slider's output. No exercise solution lives
here."""

import functools

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import HTML, display

import specmini
from course.display import show_rounds
from course.figures import save
from course.speedup import refined_speedup  # noqa: F401  (the notebook calls it from here)
from course.toys import (
    DRAFT_ABC,
    TARGET_ABC,
    bigram_pair,
    constant_model,
    measure,
    total_variation,
)
from specmini.decode import decode, speculate, token_verify

KS = np.arange(1, 21)  # the K searched for the best one


def best_k(alpha, c, ks=KS):
    """The K with the largest speed-up (Leviathan et al.'s formula) and that speed-up."""
    s = [specmini.speedup(alpha, int(k), c) for k in ks]
    return int(ks[np.argmax(s)]), max(s)


def plot_speedup_best_k(path=None, c_left=0.05):
    """Left: speed-up against K for four alphas at c = c_left. Right: best K against alpha."""
    alphas = np.linspace(0.3, 0.98, 69)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colours = plt.cm.viridis(np.linspace(0, 0.85, 4))
    for alpha, colour in zip((0.9, 0.8, 0.7, 0.6), colours, strict=True):
        s = [specmini.speedup(alpha, int(k), c_left) for k in KS]
        left.plot(KS, s, "-", color=colour, label=f"alpha = {alpha}")
        left.plot(*best_k(alpha, c_left), "*", color=colour, markersize=14)
    left.axhline(1, color="#555", linestyle="--", label="plain decoding")
    left.set(xlabel="K, tokens drafted per round", ylabel="speed-up", xticks=range(0, 21, 2))
    left.set_title(f"Speed-up against K at cost ratio c = {c_left} (stars: best K)")
    left.legend()
    colours = plt.cm.plasma(np.linspace(0, 0.8, 5))
    for c, colour in zip((0.01, 0.05, 0.1, 0.2, 0.5), colours, strict=True):
        best = [best_k(alpha, c) for alpha in alphas]
        ks = [k if s > 1 else np.nan for k, s in best]
        right.step(alphas, ks, where="mid", color=colour, label=f"c = {c}")
    right.set(xlabel="alpha, acceptance rate", ylabel="best K (searched up to 20)")
    right.set(
        yticks=range(0, 21, 2), title="Best K against alpha (gaps: no K beats plain decoding)"
    )
    right.legend()
    fig.tight_layout()
    if path is not None:
        save(fig, path)
    return fig


def plot_verification_cost(alpha, c, slopes, path=None):
    """Leviathan's curve (v_K = 1) against the refined one with an ASSUMED v_K = 1 + slope K."""
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for slope, style in zip([0.0, *slopes], ["-", "--", ":", "-."][: len(slopes) + 1], strict=True):
        s = [refined_speedup(alpha, int(k), c, 1 + slope * k) for k in KS]
        name = "Leviathan et al. (v_K = 1)" if slope == 0 else f"assumed v_K = 1 + {slope} K"
        ax.plot(KS, s, style, color="#264653", label=name)
        ax.plot(KS[np.argmax(s)], max(s), "*", color="#e76f51", markersize=12)
    ax.axhline(1, color="#555", linestyle="--", linewidth=0.8, label="plain decoding")
    ax.set(xlabel="K, tokens drafted per round", ylabel="speed-up", xticks=range(0, 21, 2))
    ax.set_title(f"alpha = {alpha}, c = {c}: a verification pass that costs more (stars: best K)")
    ax.legend(loc="lower right")
    if path is not None:
        save(fig, path)
    return fig


def kv_bytes_per_token(n_layer, n_embd, bytes_per_value=2):
    """One key and one value vector of width n_embd per layer, for every token in the cache."""
    return 2 * n_layer * n_embd * bytes_per_value


def live_rounds(K, temperature, quality, c):
    """48 tokens of a bigram pair of that quality, coloured by round; then 1,200 tokens measured:
    the pass rate of the accept tests, tokens per target call, and the speed-up at an ASSUMED
    cost ratio c, predicted from the models' mean alpha and computed from the measured tokens
    per call. The plot marks where (alpha, K, c) sits on the predicted speed-up-against-K curve."""
    target, draft = bigram_pair(vocab_size=6, quality=quality, seed=0)
    g = specmini.generate(target, draft, [0], 48, k=K, temperature=temperature, seed=1)
    display(show_rounds(g))
    m = measure(target, draft, K, temperature)
    alpha = m["mean_alpha"]
    predicted = specmini.speedup(alpha, K, c)
    from_measured = specmini.speedup_from_tokens(m["tokens_per_call"], K, c)
    expected = specmini.expected_tokens(alpha, K)
    print(f"K = {K}, temperature = {temperature:.2f}, draft quality = {quality:.2f}, c = {c:.2f}")
    print(f"pass rate: {m['pass_rate']:.4f} measured, models' mean alpha {alpha:.4f}")
    print(f"tokens per target call: {m['tokens_per_call']:.4f} measured, {expected:.4f} predicted")
    print(
        f"speed-up at assumed c = {c:.2f}: {from_measured:.2f} from measured tokens per call, "
        f"{predicted:.2f} predicted from alpha"
    )
    ks = np.arange(1, 13)
    curve = [specmini.speedup(alpha, int(k), c) for k in ks]
    fig, ax = plt.subplots(figsize=(9, 3))
    ax.plot(
        ks,
        curve,
        color="#264653",
        label=f"predicted, alpha = {alpha:.2f}, c = {c:.2f}",
    )
    ax.plot([K], [predicted], "*", color="#e76f51", markersize=14, label=f"you: K = {K}")
    ax.plot([K], [from_measured], "o", color="#2a9d8f", label="from measured tokens per call")
    ax.axhline(1, color="#555", linestyle="--", label="plain decoding")
    ax.set(xlabel="K, tokens drafted per round", ylabel="speed-up", xticks=ks)
    top = max(2.0, 1.1 * max(curve), 1.1 * from_measured)
    ax.set(ylim=(0, top), title="Where your (alpha, K, c) sits on the speed-up-against-K curve")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    plt.show()
    return {**m, "predicted": predicted, "from_measured": from_measured}


# --- the lossy U[0, b] variant: NOT EXACT for b < 1 ---------------------------------------------


def lossy_distribution(target, draft, b):
    """What one lossy step outputs: a draft passes with min(1, target / (b draft)), a rejection
    resamples from the unchanged residual norm(max(0, target - draft))."""
    target, draft = np.asarray(target, float), np.asarray(draft, float)
    ratio = np.divide(target, b * draft, out=np.ones_like(target), where=draft > 0)
    kept = draft * np.minimum(1.0, ratio)
    return kept + (1 - kept.sum()) * specmini.residual(target, draft)


def lossy_generate(target, draft, prompt, max_new_tokens, b, k=4, temperature=1.0, seed=None):
    """specmini's decoding loop and round with one change, in the accept rule: the test's r is
    drawn from U(0, b], b in (0, 1], instead of U(0, 1].

    b = 1 is the exact algorithm (and gives specmini.generate's very tokens for the same seed);
    b < 1 is Leviathan et al.'s lenience l = b (their appendix A.5): NOT the target's output.
    """

    def lenient(drafted, target_rows, draft_rows, u):  # THE CHANGE: r = b u ~ U(0, b]
        return token_verify(drafted, target_rows, draft_rows, b * u)

    one_round = functools.partial(speculate, rule=lenient)
    return decode(
        target, draft, prompt, max_new_tokens, k, temperature, seed, stop=None, one_round=one_round
    )


def lossy_curve(target, draft, k, bs):
    """For each b: total variation of one lossy step to the target, and expected tokens per call
    (the draft passes with beta_b = sum min(draft, target / b), Leviathan et al.'s alpha for l)."""
    tv = [total_variation(lossy_distribution(target, draft, b), target) for b in bs]
    beta = [np.minimum(draft, target / b).sum() for b in bs]
    return np.array(tv), np.array([specmini.expected_tokens(min(x, 1.0), k) for x in beta])


def lossy_rounds(b, k=4):
    """The b slider's function: 1,000 lossy tokens on A/B/C, their rounds, drift and gain."""
    if b < 1:
        warning = "NO LONGER EXACT: with b &lt; 1 the output drifts from the target to the draft."
        display(HTML(f'<b style="color:#c1121f">{warning}</b>'))
    else:
        display(HTML("<b>b = 1: the exact algorithm.</b>"))
    abc_target, abc_draft = constant_model(TARGET_ABC), constant_model(DRAFT_ABC)
    g = lossy_generate(abc_target, abc_draft, [0], 1000, b, k=k, seed=0)
    display(show_rounds(g._replace(tokens=g.tokens[:40])))
    p_b = lossy_distribution(TARGET_ABC, DRAFT_ABC, b)
    tv, tokens = lossy_curve(TARGET_ABC, DRAFT_ABC, k, [b])
    exact_tokens = specmini.expected_tokens(specmini.acceptance_rate(TARGET_ABC, DRAFT_ABC), k)
    simulated = len(g.tokens) / len(g.rounds)
    print(f"b = {b:.2f}: one step outputs {p_b} instead of {TARGET_ABC}: TV {tv[0]:.4f}")
    print(f"tokens per target call: {tokens[0]:.4f} expected, {simulated:.4f} measured")
    gain = tokens[0] / exact_tokens
    print(f"exact algorithm (b = 1): {exact_tokens:.4f}, so x{gain:.2f} tokens per call")
    bs = np.linspace(0.1, 1, 91)
    tvs, gains = lossy_curve(TARGET_ABC, DRAFT_ABC, k, bs)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(bs, tvs, color="#c1121f", label="total variation to the target (one step)")
    ax.set(xlabel="b, with r ~ U[0, b]", ylabel="total variation", ylim=(0, 0.25))
    twin = ax.twinx()
    twin.plot(bs, gains, color="#2a9d8f", label="tokens per target call (expected)")
    twin.plot([b], [simulated], "o", color="#2a9d8f", label="tokens per target call (measured)")
    twin.set(ylabel="tokens per target call", ylim=(0, k + 1.5))
    ax.axvline(b, color="#555", linestyle="--", label=f"b = {b:.2f}")
    ax.set_title(f"Lossy r ~ U[0, b], K = {k}, A/B/C: NO LONGER EXACT for b < 1")
    ax.legend(handles=ax.get_lines() + twin.get_lines(), loc="lower left", fontsize=8)
    plt.show()
    return {"tv": tv[0], "tokens": tokens[0], "simulated": simulated, "exact_tokens": exact_tokens}
