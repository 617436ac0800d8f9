"""The methods of notebook 07 (going further), each written on top of specmini's accept test,
residual and sampling: prompt lookup, early exit, token trees with multi-draft acceptance,
dynamic K, speculative speculative decoding (SSD) and typical acceptance. The notebook shows the
calls, the checks and the numbers. No exercise solution lives here. Its plots are in
course.lessons.lesson_07, the numpy GPT-2 it builds token trees on in course.numpy_gpt2, exact
enumeration in course.exact.

Every decoder here runs in specmini's decoding loop (specmini.decode.decode), whose rounds
are Leviathan et al.'s Algorithm 1 (specmini.decode.speculate): propose up to k tokens, score
them all in one target call, keep the accepted prefix, end with one token of the target's. What
changes from method to method is who proposes, how many, where the randomness comes from, and
(for the lossy variants only) the accept rule: `Speculation` is that round with those four as
arguments. Token trees bring a round of their own (tree_decode).
"""

import dataclasses
import functools

import numpy as np

import specmini
from course import checkpoints, gpt2
from course.exact import Script, enumerate_outcomes
from course.toys import TableModel, pass_rate, total_variation
from specmini.decode import next_probs, token_verify

# ---------- randomness ----------


class Stream:
    """specmini.generate's randomness: one numpy generator, drawn from in the same order (the
    draft's tokens, then the uniforms of the accept tests, then the target's own token)."""

    def __init__(self, seed=None):
        self.rng = np.random.default_rng(seed)

    def draw(self, probs, position=None, use=None):
        return specmini.sample(probs, self.rng)

    def uniforms(self, positions):
        return 1 - self.rng.random(len(positions))  # in (0, 1], as specmini draws them

    def coin(self, prob):
        return 1 - self.rng.random() <= prob


class Positional:
    """Randomness tied to positions, not to time: three uniforms per position of the text, drawn
    in advance (the draft's token there, the accept test there, the target's token there).

    A decoder that computes a draft earlier (SSD computes it before the verification that
    precedes it ends) then draws the very same token as one that computes it later. Still
    exact: each table entry is used for one decision of the final text; a draft that was never
    tested leaves its entry unseen, and a later round may use it again.
    """

    def __init__(self, seed=None, size=4096):
        self.tables = np.random.default_rng(seed).random((3, size))  # in [0, 1)

    def draw(self, probs, position, use):
        u = self.tables[0 if use == "draft" else 2, position]
        cdf = np.cumsum(probs)  # inverse CDF: the first token whose cumulated mass exceeds u
        return int(min(np.searchsorted(cdf, u * cdf[-1], side="right"), len(probs) - 1))

    def uniforms(self, positions):
        return 1 - self.tables[1, np.asarray(positions, dtype=int)]


# ---------- specmini's decoding loop, with the proposer as an argument ----------


def decode(target, propose, prompt, max_new_tokens, k=4, temperature=1.0, seed=None, **options):
    """Speculative decoding with any proposer: specmini's decoding loop (specmini.decode.decode)
    running `Speculation` rounds. `propose(tokens, k, temperature, chance)` returns up to k
    drafted tokens and, for each, the distribution it was drawn from.

    Options: `chance` (Stream(seed) by default: then a model proposer with fixed k gives
    specmini.generate's very tokens), `schedule(k, accepted)` -> the next round's k (dynamic K),
    `test` and `fallback` (specmini.speculative_accept and specmini.residual: the exact
    algorithm; the lossy variants replace them).
    """
    chance = options.get("chance") or Stream(seed)
    test = options.get("test", specmini.speculative_accept)
    fix = options.get("fallback", specmini.residual)
    rule = functools.partial(token_verify, test=test, fix=fix)
    one_round = Speculation(propose, chance, rule, k, options.get("schedule"))
    # The round keeps its own k (dynamic K), so the loop's cap on drafts is the token budget alone.
    return specmini.decode.decode(
        target,
        None,
        prompt,
        max_new_tokens,
        max_new_tokens,
        temperature,
        seed=None,
        stop=None,
        one_round=one_round,  # the loop's rng goes unused: `chance` draws
    )


class Speculation:
    """One round for specmini's loop: specmini.decode.speculate (Leviathan et al.'s Algorithm 1)
    with three changes. Any proposer drafts (`propose`); every draw comes from `chance`, at its
    position in the text (Positional needs the positions; Stream draws as specmini does); and
    the round keeps its own k, which `schedule(k, accepted)` may change after each round.
    `rule` is the accept rule, as in speculate: specmini.decode.token_verify or a variant."""

    def __init__(self, propose, chance, rule, k, schedule=None):
        self.propose, self.chance, self.rule, self.schedule = propose, chance, rule, schedule
        self.k = k

    def __call__(self, target, draft, prefix, budget, temperature, rng):
        k = min(self.k, budget)  # budget: the drafts the token budget leaves room for
        drafted, draft_rows = self.propose(prefix, k, temperature, self.chance) if k else ([], [])
        target_rows = next_probs(target, prefix + drafted, len(prefix) - 1, temperature)  # one call
        # Each draw at its place in the text: the accept tests' uniforms at the drafts'
        # positions, the target's token at the position it fills (Stream ignores positions).
        u = self.chance.uniforms(range(len(prefix), len(prefix) + len(drafted)))
        accepted, last = self.rule(drafted, target_rows, draft_rows, u)
        token = self.chance.draw(last, len(prefix) + len(accepted), "target")
        n, a = len(drafted), len(accepted)
        self.k = self.schedule(self.k, a) if self.schedule else self.k
        ending = "plain" if not n else "bonus" if a == n else "correction"
        return accepted + [token], specmini.Round(n, a, ending)


def model_drafts(draft):
    """The usual proposer: the draft model samples k tokens, one call after the other."""

    def propose(seq, k, temperature, chance):
        drafted, rows = [], []
        for i in range(k):
            rows.append(next_probs(draft, seq + drafted, len(seq) + i - 1, temperature)[0])
            drafted.append(chance.draw(rows[-1], len(seq) + i, "draft"))
        return drafted, rows

    return propose


def summary(g):
    """The pass rate (accept tests passed / run), tokens per target call, target calls."""
    return {
        "pass_rate": pass_rate(g),
        "per_call": len(g.tokens) / len(g.rounds),
        "calls": len(g.rounds),
        "drafted": sum(r.drafted for r in g.rounds),
    }


# ---------- 1. prompt lookup ----------


def lookup(tokens, k, max_ngram=3):
    """Hugging Face's prompt lookup: the last n tokens (n = max_ngram, then smaller), searched
    for earlier in the text; the (up to) k tokens after their first occurrence are the draft."""
    tokens = list(tokens)
    for n in range(min(max_ngram, len(tokens) - 1), 0, -1):
        tail = tokens[-n:]
        for start in range(len(tokens) - n):  # every window but the tail itself
            if tokens[start : start + n] == tail:
                return tokens[start + n : start + n + k]
    return []


def lookup_drafts(vocab_size, max_ngram=3):
    """Prompt lookup as a proposer: its 'distribution' is a point mass on each looked-up token,
    so the accept test keeps token x with probability target(x), and after a rejection the
    residual is the target with x removed. Nothing is sampled, no model is called."""

    def propose(seq, k, temperature, chance):
        drafted = lookup(seq, k, max_ngram)
        return drafted, np.eye(vocab_size)[drafted]

    return propose


# ---------- 2. self-speculation: an early exit ----------


def early_exit(model, layers, buckets=gpt2.BUCKETS):
    """The target's first `layers` blocks with its own final norm and head, as a model of its
    own: a draft with no training and no new weights (LayerSkip, Draft & Verify). `buckets`:
    the new-token counts it compiles calls for (gpt2.GPT2)."""
    cfg = dataclasses.replace(model.config, n_layer=layers)
    state = {
        name: t
        for name, t in checkpoints.hf_state_dict(model, prefix="").items()
        if not name.startswith("h.") or int(name.split(".")[1]) < layers
    }
    return checkpoints.load_state(gpt2.GPT2(cfg, buckets), state, f"the first {layers} blocks")


# ---------- 3. token trees and multi-draft acceptance ----------


class TokenTree:
    """Drafted continuations as a tree: node i holds one token; `parents[i]` is the node before
    it (-1: the text's last token, the root). Nodes are added parents first. Each node keeps the
    nodes on its path from the root (`paths`), from which the tree's attention is built."""

    def __init__(self):
        self.tokens, self.parents, self.paths = [], [], []

    def add(self, token, parent=-1):
        self.tokens.append(int(token))
        self.parents.append(parent)
        self.paths.append((self.paths[parent] if parent >= 0 else ()) + (len(self.tokens) - 1,))
        return len(self.tokens) - 1

    @property
    def depths(self):
        return [len(path) - 1 for path in self.paths]

    def attention(self):
        """mask[i, j]: node j lies on node i's path (node i itself included)."""
        mask = np.zeros((len(self.tokens),) * 2, bool)
        for i, path in enumerate(self.paths):
            mask[i, list(path)] = True
        return mask

    def children(self, node):
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def branches(self):
        """Every root-to-leaf path, as lists of node ids."""
        return [list(p) for i, p in enumerate(self.paths) if not self.children(i)]


def tree_probs(model, prefix, tree, temperature, mask=None):
    """Next-token distributions after the prefix and after each node, from one model call."""
    if isinstance(model, TableModel):  # a bigram reads only the last token: no mask needed
        logits = model.table[[prefix[-1]] + tree.tokens]
    else:
        logits = model.tree_logits(prefix, tree, tree.attention() if mask is None else mask)
    return specmini.probabilities(logits, temperature)


def draft_tree(draft, prefix, width, depth, temperature, chance):
    """`width` independent draws from the draft after the prefix and after each node, down to
    `depth` levels (SpecInfer's i.i.d. candidates): width + width^2 + ... nodes. Also returns the
    draft's distribution at the root and at every node but the leaves (one draft call per
    level)."""
    tree, level, rows = TokenTree(), [-1], None
    for _ in range(depth):
        rows = tree_probs(draft, prefix, tree, temperature)  # the root's, then each node's
        level = [
            tree.add(chance.draw(rows[parent + 1]), parent)
            for parent in level
            for _ in range(width)
        ]
    return tree, rows


def multi_draft_walk(tree, target_rows, draft_rows, chance, update=True):
    """SpecInfer's multi-step speculative sampling (Miao et al. 2024) down a tree of i.i.d.
    candidates. At a node, test its children one by one against the target; a child passes with
    min(1, target/draft); after each rejection the target's distribution becomes the residual
    norm(max(0, target - draft)) for the next child. The first child that passes is kept and
    the walk goes on from it; if none passes, one token from what is left of the target ends the
    round; at a leaf, a bonus token from the target's row there.

    `update=False` is the broken variant: every child tested against the original target row.
    Returns the new tokens and how the round ended.
    """
    node, out = -1, []
    while True:
        children = tree.children(node)
        if not children:
            return out + [chance.draw(target_rows[node + 1])], "bonus"
        target_row, draft_row = target_rows[node + 1], draft_rows[node + 1]
        for child in children:
            x = tree.tokens[child]
            if chance.coin(min(1.0, target_row[x] / draft_row[x])):
                out.append(x)
                node = child
                break
            if update:
                target_row = specmini.residual(target_row, draft_row)
        else:
            residual = target_row if update else specmini.residual(target_row, draft_row)
            return out + [chance.draw(residual)], "correction"


def tree_decode(target, draft, prompt, max_new_tokens, width, depth, temperature=1.0, seed=None):
    """Speculative sampling with token trees, in specmini's decoding loop: one draft call per
    level, one target call per round over the whole tree, SpecInfer's walk as the accept rule."""
    chance = Stream(seed)

    def one_round(target, draft, prefix, levels, temperature, rng):  # one round, as in speculate
        tree, draft_rows = draft_tree(draft, prefix, width, levels, temperature, chance)
        target_rows = tree_probs(target, prefix, tree, temperature)
        new, ending = multi_draft_walk(tree, target_rows, draft_rows, chance)
        return new, specmini.Round(len(tree.tokens), len(new) - 1, ending)

    # levels: depth, or as many as the token budget leaves room for
    return specmini.decode.decode(
        target,
        draft,
        prompt,
        max_new_tokens,
        depth,
        temperature,
        seed=None,
        stop=None,
        one_round=one_round,
    )


def tree_round_outcomes(target, draft, width, depth, update=True):
    """One tree round on bigram models, as exact outcome probabilities (memoised per context):
    a `round_outcomes(text, remaining)` for course.exact.chained_outcomes."""
    memo = {}

    def outcomes(text, remaining):
        last, levels = text[-1], min(depth, remaining - 1)
        if (last, levels) not in memo:

            def program(chance):
                tree, draft_rows = draft_tree(draft, [last], width, levels, 1.0, chance)
                target_rows = tree_probs(target, [last], tree, 1.0)
                return tuple(multi_draft_walk(tree, target_rows, draft_rows, chance, update)[0])

            memo[last, levels] = enumerate_outcomes(program, Script)
        return memo[last, levels]

    return outcomes


def transition_z(tokens, first, target):
    """How far a long text's bigram statistics are from a bigram target's table: for every pair
    (a, b) expected at least 5 times, the frequency of b after a against target(b | a), in
    standard errors. An exact
    decoder gives a text whose next token follows the target's row of the last one, so no pair
    should stray beyond 4 or 5 standard errors; the largest is returned."""
    table = specmini.probabilities(target.table)
    counts = np.zeros_like(table)
    np.add.at(counts, ([first] + list(tokens[:-1]), list(tokens)), 1)
    n = counts.sum(1, keepdims=True)
    spread = np.sqrt(table * (1 - table) / np.maximum(n, 1))
    z = np.abs(counts / np.maximum(n, 1) - table) / np.where(spread > 0, spread, np.inf)
    enough = (n * table >= 5) & (n * (1 - table) >= 5)  # where the normal approximation holds
    return float(z[enough].max())


# ---------- 4. dynamic K ----------


def hf_schedule(cap=None):
    """Hugging Face's heuristic for the number of assistant tokens: K + 2 after a round whose
    drafts were all accepted, K - 1 otherwise, never below 1 (and here never above `cap`)."""

    def schedule(k, accepted):
        k = k + 2 if accepted == k else max(1, k - 1)
        return min(k, cap) if cap else k

    return schedule


def dynamic_k_trace(target, draft, prompt, max_new_tokens, k0, schedule, temperature, seed):
    """decode with a schedule, and the K each round used."""
    ks = []

    def tracked(k, accepted):
        ks.append(k)
        return schedule(k, accepted)

    propose = model_drafts(draft)
    g = decode(target, propose, prompt, max_new_tokens, k0, temperature, seed, schedule=tracked)
    return g, ks


def run_time(g, t_draft, t_verify):
    """Time a run takes if a draft token costs t_draft and a target call over n new tokens
    t_verify(n), the models taking turns (nothing overlaps)."""
    return sum(r.drafted * t_draft + t_verify(r.drafted + 1) for r in g.rounds)


# ---------- 5. speculative speculative decoding (SSD, Saguaro) ----------


class SpeculationCache:
    """SSD's proposer (Kumar, Dao and May 2026). While the target verifies a round, the draft
    prepares the next one for the outcomes it finds likely: an outcome is how many drafts pass
    (a = 0 .. K) and the target's token after them. For each a it guesses the draft's `fanout[a]`
    most likely tokens there (for a < K, leaving out the draft that would have been rejected)
    and drafts K tokens after each guess. If the real outcome is in the cache (a hit), the next
    round's drafts are ready the moment verification ends; else (a miss) it drafts as usual.

    `key` maps a context to its cache key: the whole context is right; a key that forgets the
    target's token (the broken variant) serves drafts made for another token.
    """

    def __init__(self, draft, fanout, key=tuple):
        self.propose, self.fanout, self.key = model_drafts(draft), fanout, key
        self.draft, self.cache, self.hits, self.prepared = draft, {}, [], []

    def __call__(self, seq, k, temperature, chance):
        cached = self.cache.get(self.key(seq))
        hit = cached is not None and len(cached[0]) >= k
        if hit:
            drafted, rows = cached[0][:k], cached[1][:k]
        else:
            drafted, rows = self.propose(seq, k, temperature, chance)
        self.hits.append(hit)
        self.prepare(seq, drafted, rows, k, temperature, chance)
        return drafted, rows

    def prepare(self, seq, drafted, rows, k, temperature, chance):
        """What the draft does while the target verifies: its logits after all K drafts (the
        others it has from drafting), then K drafts after each guessed outcome."""
        logits = self.draft(seq + drafted, len(seq) - 1)  # ranks by logits: fine at T = 0 too
        self.cache = {}
        for a in range(len(drafted) + 1):
            order = np.argsort(-logits[a], kind="stable")
            guesses = [int(y) for y in order if a == len(drafted) or y != drafted[a]]
            for y in guesses[: self.fanout[min(a, len(self.fanout) - 1)]]:
                context = seq + drafted[:a] + [y]
                self.cache[self.key(context)] = self.propose(context, k, temperature, chance)
        self.prepared.append(len(self.cache))


def event_clock(rounds, hits, t_draft, t_verify, prepare=None, host=0.0):
    """Wall-clock of a run on two devices, one per model, from its rounds and cache hits.

    Plain speculative decoding (`hits` None): each round drafts, then verifies. SSD: while the
    target verifies round r, the draft device spends `prepare[r]` draft steps preparing round
    r + 1 (K + 1 if its guesses are drafted as one batch at the cost of one sequence); on a hit,
    round r + 1 starts as soon as both are done; on a miss the draft then drafts it as usual.
    `host`: time per round outside the models (the accept test, sampling, Python), spent after
    each verification by both. Returns the time at which the last verification ends.
    """
    ready = rounds[0].drafted * t_draft  # the first round is drafted as usual
    end = 0.0
    for r, rnd in enumerate(rounds):
        start, end = ready, ready + t_verify(rnd.drafted + 1)
        if r + 1 == len(rounds):
            break
        following = rounds[r + 1].drafted
        if hits is None:
            ready = end + host + following * t_draft
            continue
        prepared = start + prepare[r] * t_draft
        # a last round with nothing to draft (plain) calls no proposer: no hit recorded for it
        ready = max(end + host, prepared) + (
            0 if not following or hits[r + 1] else following * t_draft
        )
    return end + host


# ---------- 6. lossy acceptance ----------


def entropy(probs):
    p = np.asarray(probs, float)
    return float(-(p[p > 0] * np.log(p[p > 0])).sum())


def typical_threshold(target_row, epsilon, delta):
    """Medusa's typical acceptance (Cai et al. 2024): a draft x passes when
    target(x) > min(epsilon, delta * exp(-entropy(target)))."""
    return min(epsilon, delta * np.exp(-entropy(target_row)))


def typical_test(epsilon, delta=None):
    """The accept test of typical acceptance (a replacement for specmini.speculative_accept)."""
    delta = np.sqrt(epsilon) if delta is None else delta  # Medusa's default pairing

    def test(drafted, target_rows, draft_rows, uniforms):
        kept = []
        for x, row in zip(drafted, target_rows, strict=True):
            if not row[x] > typical_threshold(row, epsilon, delta):
                break
            kept.append(x)
        return kept

    return test


def target_fallback(target_row, draft_row):
    """After a typical-acceptance rejection Medusa samples the target itself, not a residual."""
    return target_row


def typical_step(target_row, draft_row, epsilon, delta=None):
    """What one typical-acceptance step outputs: the drafts that pass, else the target."""
    delta = np.sqrt(epsilon) if delta is None else delta
    passes = target_row > typical_threshold(target_row, epsilon, delta)
    kept = draft_row * passes
    return kept + (1 - kept.sum()) * target_row


def drift_along(target_rows, draft_rows, step):
    """Mean total variation between one step's output and the target, over many contexts."""
    return float(
        np.mean(
            [total_variation(step(t, d), t) for t, d in zip(target_rows, draft_rows, strict=True)]
        )
    )
