"""The methods of notebook 07 (going further), each written on top of specmini's accept test,
residual and sampling: prompt lookup, early exit, token trees with multi-draft acceptance,
dynamic K, speculative speculative decoding (SSD) and typical acceptance. The notebook shows the
calls, the checks and the numbers. No exercise solution lives here.

Every decoder here follows specmini.generate's round (Leviathan et al. 2023, Algorithm 1):
propose up to k tokens, score them all in one target call, keep the accepted prefix, end with
one token of the target's. What changes from method to method is who proposes, how many, and
(for the lossy variants only) the test.
"""

import dataclasses
import os
import platform
import time
from pathlib import Path

import gpt2
import matplotlib.pyplot as plt
import numpy as np
from toys import TableModel, total_variation

import specmini
from specmini.decode import next_probs

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


# ---------- the decoding loop, with the proposer as an argument ----------


def decode(target, propose, prompt, max_new_tokens, k=4, temperature=1.0, seed=None, **options):
    """Speculative decoding with any proposer. `propose(tokens, k, temperature, chance)` returns
    up to k drafted tokens and, for each, the distribution it was drawn from.

    Options: `chance` (Stream(seed) by default: then a model proposer with fixed k gives
    specmini.generate's very tokens), `schedule(k, accepted)` -> the next round's k (dynamic K),
    `test` and `fallback` (specmini.speculative_accept and specmini.residual: the exact
    algorithm; the lossy variants replace them).
    """
    chance = options.get("chance") or Stream(seed)
    schedule = options.get("schedule")
    test = options.get("test", specmini.speculative_accept)
    fallback = options.get("fallback", specmini.residual)
    out = specmini.Generation([], [])
    while len(out.tokens) < max_new_tokens:
        seq = list(prompt) + out.tokens
        budget = min(k, max_new_tokens - len(out.tokens) - 1)  # as specmini: room for one more
        drafted, draft_rows = propose(seq, budget, temperature, chance) if budget else ([], [])
        n = len(drafted)
        target_rows = next_probs(target, seq + drafted, len(seq) - 1, temperature)  # one call
        u = chance.uniforms(range(len(seq), len(seq) + n))
        accepted = list(test(drafted, target_rows[:-1], draft_rows, u)) if n else []
        a = len(accepted)
        last, ending = target_rows[n], "bonus" if n else "plain"
        if a < n:
            last, ending = fallback(target_rows[a], draft_rows[a]), "correction"
        out.tokens.extend(accepted + [chance.draw(last, len(seq) + a, "target")])
        out.rounds.append(specmini.Round(n, a, ending))
        k = schedule(k, a) if schedule else k
    return out


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
    """Acceptance (accept tests passed / run), tokens per target call, target calls."""
    accepted = sum(r.accepted for r in g.rounds)
    tests = accepted + sum(r.ended_with == "correction" for r in g.rounds)
    return {
        "acceptance": accepted / max(tests, 1),
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


# ---------- models: compiled calls of few sizes, and a numpy twin ----------


class Bucketed:
    """A gpt2.GPT2 whose calls run only the new-token counts in `sizes` (padded with token 0
    when fewer are real), so that few compiled calls are built: each new count compiles for
    seconds on a CPU. A call with n new rows runs the smallest size >= n; the cache is brought
    up to `start` in chunks of the largest size.

    Padding is safe: the model keeps its cache for the longest common prefix of what it has and
    what it is given, so a padding entry is reused only where it is the real token anyway.
    """

    def __init__(self, model, sizes):
        self.model, self.sizes, self.config = model, sorted(sizes), model.config

    def call(self, tokens, start):
        size = next((s for s in self.sizes if s >= len(tokens) - start), self.sizes[-1])
        pad = min(size - (len(tokens) - start), self.config.n_positions - len(tokens))
        return self.model(list(tokens) + [0] * pad, start)[: len(tokens) - start]

    def __call__(self, tokens, start):
        tokens, cached, big = list(tokens), self.model.cached, self.sizes[-1]
        kept = 0
        while kept < min(start, len(cached)) and cached[kept] == tokens[kept]:
            kept += 1
        for i in range(kept, start, big):  # bring the cache up to `start`
            self.call(tokens[: min(i + big, start)], i)
        rows = [self.call(tokens[: i + big], i) for i in range(start, len(tokens), big)]
        return np.concatenate(rows)

    def reset(self):
        self.model.reset()


def early_exit(model, layers):
    """The target's first `layers` blocks with its own final norm and head, as a model of its
    own: a draft with no training and no new weights (LayerSkip, Draft & Verify)."""
    cfg = dataclasses.replace(model.config, n_layer=layers)
    state = {
        name: t
        for name, t in gpt2.hf_state_dict(model, prefix="").items()
        if not name.startswith("h.") or int(name.split(".")[1]) < layers
    }
    return gpt2.load_state(gpt2.GPT2(cfg), state, f"the first {layers} blocks")


def layer_norm(x, gain, bias, eps):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) * gain + bias


def gelu(x):  # the tanh approximation, GPT-2's gelu_new
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


class NumpyGPT2:
    """The same GPT-2 in numpy (float64), with nothing to compile and two things gpt2.py's
    compiled calls do not take: any attention mask among the new tokens (a token tree needs
    one) and an exit after any block (early exit). It keeps the keys and values of the last
    text it read, as gpt2.py does, and is a specmini model too."""

    def __init__(self, model):
        self.config = model.config
        self.w = {k: v.float().numpy().astype(np.float64) for k, v in gpt2.weights(model).items()}
        self.cached, self.past = [], [(np.zeros((0, 0)),) * 2] * model.config.n_layer

    def norm(self, x, name):
        w, eps = self.w, self.config.layer_norm_epsilon
        return layer_norm(x, w[name + ".weight"], w[name + ".bias"], eps)

    def linear(self, x, name):  # weights held (out, in), as gpt2.py holds them
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def run(self, tokens, positions, mask, past, exits=None):
        """New tokens at `positions`, after the keys and values in `past` (one (keys, values)
        pair per block, each (heads, n_past, width)), all of which they see; among themselves
        token i sees token j where mask[i, j]. Returns the logits after each block in `exits`
        (default: the last) and the blocks' new keys and values."""
        cfg, w = self.config, self.w
        heads, width, n = cfg.n_head, cfg.n_embd // cfg.n_head, len(tokens)
        exits = exits or [cfg.n_layer]
        x = w["wte.weight"][tokens] + w["wpe.weight"][positions]
        out, new_past = {}, []
        for i in range(max(exits)):
            qkv = self.linear(self.norm(x, f"h.{i}.ln_1"), f"h.{i}.attn.c_attn")
            q, k, v = qkv.reshape(n, 3, heads, width).transpose(1, 2, 0, 3)  # (heads, n, width)
            if past[i][0].size:
                k, v = np.concatenate([past[i][0], k], 1), np.concatenate([past[i][1], v], 1)
            new_past.append((k, v))
            sees = np.concatenate([np.ones((n, k.shape[1] - n), bool), mask], 1)
            scores = np.where(sees, q @ k.transpose(0, 2, 1) / np.sqrt(width), -np.inf)
            weights = np.exp(scores - scores.max(-1, keepdims=True))
            y = (weights / weights.sum(-1, keepdims=True)) @ v  # (heads, n, width)
            x = x + self.linear(y.transpose(1, 0, 2).reshape(n, cfg.n_embd), f"h.{i}.attn.c_proj")
            h = gelu(self.linear(self.norm(x, f"h.{i}.ln_2"), f"h.{i}.mlp.c_fc"))
            x = x + self.linear(h, f"h.{i}.mlp.c_proj")
            if i + 1 in exits:  # the final norm and the tied head, after block i + 1
                out[i + 1] = self.norm(x, "ln_f") @ w["wte.weight"][: cfg.vocab_size].T
        return [out[e] for e in exits], new_past

    def read(self, tokens):
        """Keys and values of a text, reusing what is cached for its longest common prefix."""
        kept = 0
        while kept < min(len(tokens), len(self.cached)) and self.cached[kept] == tokens[kept]:
            kept += 1
        past = [(k[:, :kept], v[:, :kept]) for k, v in self.past]
        if kept < len(tokens):
            new = np.arange(kept, len(tokens))
            causal = np.tril(np.ones((len(new),) * 2, bool))
            past = self.run(np.asarray(tokens[kept:]), new, causal, past)[1]
        self.cached, self.past = list(tokens), past
        return past

    def __call__(self, tokens, start):
        tokens = [int(t) for t in tokens]
        past, new = self.read(tokens[:start]), np.arange(start, len(tokens))
        causal = np.tril(np.ones((len(new),) * 2, bool))
        return self.run(np.asarray(tokens[start:], dtype=int), new, causal, past)[0][0]

    def exit_logits(self, tokens, exits):
        """The logits of a whole text after each number of blocks in `exits` (early exits)."""
        n = len(tokens)
        causal = np.tril(np.ones((n, n), bool))
        empty = [(np.zeros((0, 0)),) * 2] * self.config.n_layer
        return self.run(np.asarray(tokens), np.arange(n), causal, empty, exits)[0]

    def tree_logits(self, prefix, tree, node_mask):
        """One pass over the prefix's last token and every node of a token tree: the row after
        the prefix, then one row per node. Node i sits at position len(prefix) + its depth,
        sees the whole prefix and the nodes that `node_mask[i]` allows."""
        prefix, n = [int(t) for t in prefix], len(tree.tokens)
        past = self.read(prefix[:-1])
        mask = np.zeros((n + 1, n + 1), bool)
        mask[:, 0] = True  # everything sees the prefix's last token
        mask[1:, 1:] = node_mask
        positions = len(prefix) + np.concatenate([[-1], np.asarray(tree.depths, dtype=int)])
        tokens = np.asarray(prefix[-1:] + tree.tokens, dtype=int)
        return self.run(tokens, positions, mask, past)[0][0]


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
        p, q = target_rows[node + 1], draft_rows[node + 1]
        for child in children:
            x = tree.tokens[child]
            if chance.coin(min(1.0, p[x] / q[x])):
                out.append(x)
                node = child
                break
            if update:
                p = specmini.residual(p, q)
        else:
            residual = p if update else specmini.residual(p, q)
            return out + [chance.draw(residual)], "correction"


def tree_decode(target, draft, prompt, max_new_tokens, width, depth, temperature=1.0, seed=None):
    """Speculative sampling with token trees: one draft call per level, one target call per
    round over the whole tree."""
    chance, out = Stream(seed), specmini.Generation([], [])
    while len(out.tokens) < max_new_tokens:
        seq = list(prompt) + out.tokens
        levels = min(depth, max_new_tokens - len(out.tokens) - 1)
        tree, draft_rows = draft_tree(draft, seq, width, levels, temperature, chance)
        target_rows = tree_probs(target, seq, tree, temperature)
        new, ending = multi_draft_walk(tree, target_rows, draft_rows, chance)
        out.tokens.extend(new)
        out.rounds.append(specmini.Round(len(tree.tokens), len(new) - 1, ending))
    return out


class Branch(Exception):
    """Raised by a Trail at a choice it has no instruction for: the options, with probabilities."""

    def __init__(self, options):
        self.options = options


class Trail:
    """A stand-in for the random generator that follows a fixed list of choices."""

    def __init__(self, forced):
        self.forced, self.used = forced, 0

    def choose(self, options):
        if self.used == len(self.forced):
            raise Branch([(value, p) for value, p in options if p > 0])
        self.used += 1
        return self.forced[self.used - 1][0]

    def draw(self, probs, position=None, use=None):
        return self.choose(enumerate(probs))

    def coin(self, prob):
        return self.choose([(True, prob), (False, 1 - prob)])


def enumerate_outcomes(program):
    """Every result of a randomised `program(chance)` with its exact probability: the program is
    run again and again, each run following one more branch of its draws and coins, until every
    path has been followed to its end. Exact, with no sampling at all."""
    results, todo = {}, [()]
    while todo:
        forced = todo.pop()
        try:
            result = program(Trail(forced))
        except Branch as b:
            todo.extend(forced + (option,) for option in b.options)
            continue
        results[result] = results.get(result, 0.0) + float(np.prod([p for _, p in forced]))
    return results


def chained_outcomes(round_outcomes, first, length):
    """Exact distribution of the first `length` tokens when rounds are chained: each round's
    outcomes depend on the last token and on how many tokens are still to come (a bigram)."""
    done, frontier = {}, {(): 1.0}
    while frontier:
        seq, prob = frontier.popitem()
        last = seq[-1] if seq else first
        for emitted, p in round_outcomes(last, length - len(seq)).items():
            new = (seq + emitted)[:length]
            bucket = done if len(new) == length else frontier
            bucket[new] = bucket.get(new, 0.0) + prob * p
    return done


def bigram_joint(target, first, length):
    """The target's own distribution over its next `length` tokens (a bigram TableModel)."""
    table = specmini.probabilities(target.table)
    joint = {(): 1.0}
    for _ in range(length):
        joint = {
            seq + (y,): p * table[seq[-1] if seq else first][y]
            for seq, p in joint.items()
            for y in range(table.shape[1])
        }
    return joint


def tree_round_outcomes(target, draft, width, depth, update=True):
    """One tree round on bigram models, as exact outcome probabilities (memoised per context)."""
    memo = {}

    def outcomes(last, remaining):
        levels = min(depth, remaining - 1)
        if (last, levels) not in memo:

            def program(chance):
                tree, draft_rows = draft_tree(draft, [last], width, levels, 1.0, chance)
                target_rows = tree_probs(target, [last], tree, 1.0)
                return tuple(multi_draft_walk(tree, target_rows, draft_rows, chance, update)[0])

            memo[last, levels] = enumerate_outcomes(program)
        return memo[last, levels]

    return outcomes


def joint_tv(exact, want):
    """Total variation between two distributions over sequences, given as dicts."""
    keys = set(exact) | set(want)
    return 0.5 * sum(abs(exact.get(s, 0.0) - want.get(s, 0.0)) for s in keys)


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
    prepares the next one for the outcomes it finds likely: a outcome is how many drafts pass
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
        ready = max(end + host, prepared) + (0 if hits[r + 1] else following * t_draft)
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


# ---------- timing and the figure ----------


def race(runs, repeat=5):
    """The fastest of `repeat` runs of each function in `runs` (name -> fn), in seconds. The
    functions take turns, so that a busy spell of a shared machine slows them all alike."""
    best = dict.fromkeys(runs, np.inf)
    for _ in range(repeat):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def plot_per_token(bars, machine, path=None):
    """Milliseconds per token of each method, measured bars solid, simulated ones hatched."""
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    names = list(bars)
    values = [bars[n][0] for n in names]
    colours = ["#888888", "#4c72b0", "#55a868", "#c44e52", "#8172b2", "#dd8452", "#937860"]
    for i, name in enumerate(names):
        simulated = bars[name][1] == "simulated"
        ax.barh(
            i,
            values[i],
            color=colours[i % len(colours)],
            hatch="//" if simulated else None,
            edgecolor="white",
            label="simulated: event clock (hatched)" if simulated else None,
        )
        ax.text(values[i], i, f" {values[i]:.2f} ms", va="center", fontsize=9)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values) * 1.25)
    ax.set(xlabel="wall-clock per token (ms), lower is faster")
    ax.set_title(f"Offline pair, 40 greedy tokens after the code prompt: {machine}")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    unique = {"measured (solid)": plt.Rectangle((0, 0), 1, 1, color="#4c72b0"), **unique}
    ax.legend(unique.values(), unique.keys(), loc="lower right", fontsize=8)
    fig.tight_layout()
    if path:
        Path(path).parent.mkdir(exist_ok=True)  # figures/ beside notebooks/, in any copy
        fig.savefig(path, dpi=110)
    plt.show()


def machine_name():
    """'2-core AMD EPYC CPU' and the like: which machine a timing comes from."""
    cpuinfo, name = Path("/proc/cpuinfo"), platform.processor() or "unknown"
    if cpuinfo.is_file():
        lines = cpuinfo.read_text().splitlines()
        names = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")]
        name = names[0] if names else name
    return f"{os.cpu_count()}-core {name} CPU"


def plot_drift(curves, exact_per_call, path=None):
    """Total variation from the target against tokens per target call, one curve per rule."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for (label, points), marker in zip(curves.items(), "os", strict=False):
        per_call, tv, params = zip(*points, strict=True)
        ax.plot(per_call, tv, marker=marker, label=label)
        for x, y, p in zip(per_call, tv, params, strict=True):
            ax.annotate(f"{p:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.plot([exact_per_call], [0], "k*", markersize=12, label="exact test (b = 1)")
    ax.set(
        xlabel="tokens per target call (measured)",
        ylabel="total variation from the target",
        title="Lossy acceptance on the offline pair, K = 4, temperature 1",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
    plt.show()
