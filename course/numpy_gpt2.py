"""GPT-2 in plain numpy, picoGPT-style: the model of course.gpt2 written out as arrays, with
nothing compiled. Notebook 07 uses it where the compiled calls cannot go: a token tree's
attention mask, and an exit after any block.
"""

import numpy as np

from course import gpt2


def layer_norm(x, gain, bias, eps):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) * gain + bias


def gelu(x):  # the tanh approximation, GPT-2's gelu_new
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


class NumpyGPT2:
    """The same GPT-2 in numpy (float64), with nothing to compile and two things gpt2.py's
    compiled calls do not take: any attention mask among the new tokens (a token tree needs
    one) and an exit after any block (early exit). It keeps the keys and values of the last
    text it read, as gpt2.py does, and is a specmini model too. Made from a gpt2.GPT2, whose
    weights it copies: tests/test_gpt2.py holds the two to the same logits."""

    def __init__(self, model):
        self.config = model.config
        self.w = {k: v.float().numpy().astype(np.float64) for k, v in gpt2.weights(model).items()}
        self.cached, self.past = [], [(np.zeros((0, 0)),) * 2] * model.config.n_layer

    def norm(self, x, name):
        w, eps = self.w, self.config.layer_norm_epsilon
        return layer_norm(x, w[name + ".weight"], w[name + ".bias"], eps)

    def linear(self, x, name):  # weights held (in, out), as the files and gpt2.py hold them
        return x @ self.w[name + ".weight"] + self.w[name + ".bias"]

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
        kept = gpt2.common_prefix(self.cached, tokens, len(tokens))
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
