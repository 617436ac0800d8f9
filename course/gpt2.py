"""GPT-2 in tinygrad, named like Hugging Face's checkpoints, with a KV cache for speculation.

The model only: `course.checkpoints` reads its files, `course.numpy_gpt2` is the same model in
numpy, `course.speed` makes it fast (runtime, kernel rule, device layouts). A `GPT2` is a specmini
model: `model(tokens, start)` returns the logits of tokens[start:] (len(tokens) - start, vocab).
Parameter names and layouts (linear layers (in, out)) are the hub files'.

Two paths through each module: `__call__`, the reference (whole sequences, as in training), and
`decode`: T new positions from start_pos on, against a KV cache, each LayerNorm folded into the
matmul after it, from weights laid out for the device. `Block.decode` and `GPT2.decode` take
(x, start_pos, key_blocks); their parts take what they need.
"""

from dataclasses import dataclass

import numpy as np

from course.speed import runtime

runtime.start()  # first: tinygrad reads which CPU runtime to run once, when it is imported

from course.speed import layouts  # noqa: E402
from course.toys import first_difference, gpt2_parameters  # noqa: E402

from tinygrad import Tensor, dtypes  # noqa: E402
from tinygrad.nn import Embedding, LayerNorm  # noqa: E402
from tinygrad.nn.state import get_state_dict  # noqa: E402

TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")  # all three are the tanh formula
# The new-token counts a model compiles a call for, each in seconds on a CPU (a call over fewer
# tokens is padded up to the next): every choice the course makes, here.
BUCKETS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 16)  # all there may be: K + 1 up to K = 8; 16 for prompts
CHUNK = BUCKETS[-1]  # the most new positions per compiled call; longer inputs go in chunks
CALLS = {
    # a draft in specmini.generate: one new token, two after a bonus round (its last draft was
    # never fed to it); a prompt in chunks of two, a millisecond each: cheaper than a third call
    "draft": (1, 2),
    "lesson": (1, 8),  # notebook 06's target: a step, a pass for K up to 7, prompts in chunks of 8
    "going further": (1, 5, 8),  # notebook 07's target: a step, K = 4 and K = 7
    "costs": (1, 2, 3, 4, 5, 6, 7, 8),  # a call over each count, to measure v_K (06b)
}


def calls_for(ks):  # the benchmark's target: a step, 2, a pass for each K timed, prompts in chunks
    return tuple(sorted({1, 2, CHUNK} | {k + 1 for k in ks}))


@dataclass(frozen=True)
class Config:
    """The fields of a Hugging Face GPT-2 config.json that the forward pass needs."""

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None  # None means 4 * n_embd
    layer_norm_epsilon: float = 1e-5
    activation_function: str = "gelu_new"

    def __post_init__(self):
        sizes = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")
        for name in sizes + (("n_inner",) if self.n_inner is not None else ()):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"config {name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"config n_head={self.n_head} does not divide n_embd={self.n_embd}")

    @property
    def parameters(self):
        """The weights of a GPT-2 of this shape, as its files count them (toys.gpt2_parameters)."""
        return gpt2_parameters(
            self.n_layer, self.n_embd, self.vocab_size, self.n_positions, self.n_inner
        )


class Linear:
    """x @ weight + bias, weights (in, out) as in GPT-2's files and picoGPT (nanoGPT: (out, in));
    `decode` reads the copy that GPT2.fold lays out for the device (layouts.lay_out)."""

    def __init__(self, n_in, n_out):
        self.weight = Tensor.normal(n_in, n_out, std=0.02)
        self.bias = Tensor.zeros(n_out)

    def __call__(self, x):
        return x @ self.weight + self.bias

    def decode(self, x):
        return layouts.matmul(x, self.laid_out) + self.bias


@dataclass
class TiedHead:
    """The output head: `weight` is the embedding (vocab, n_embd) seen transposed, (in, out)."""

    embedding: Embedding
    weight = property(lambda self: self.embedding.weight.T)  # a view; sums run along its rows


class NormLinear:
    """linear(ln(x)) in one kernel: the LayerNorm `ln` folded into the matmul that follows it.

    With g, s the norm's gain and shift, mean and rstd = 1 / std of each row of x, W (in, out):
        layer_norm(x) @ W + b  =  rstd * (x @ (g W) - mean * colsum(g W))  +  (s @ W + b)
    so the norm becomes two numbers per row, applied after the sum (unfolded, a GPU runs three
    more kernels per norm). `fold` computes colsum(g W) and s @ W + b from the weights as they are.
    """

    def __init__(self, ln, linear):  # linear: anything with a weight (in, out), a bias or not
        self.ln, self.linear = ln, linear

    def fold(self):  # -> colsum(g W) (out,), s @ W + b (out,)
        ln, weight, bias = self.ln, self.linear.weight, getattr(self.linear, "bias", None)
        self.colsum = (ln.weight.float().reshape(-1, 1) * weight.float()).sum(0).contiguous()
        shift = ln.bias.float() @ weight.float()  # (out,), as colsum: once, at fold
        self.bias = (shift if bias is None else shift + bias.float()).contiguous()
        return self.colsum, self.bias

    def __call__(self, x):  # x (B, T, in) -> (B, T, out)
        moments = Tensor.stack(x, x * x).float().mean(-1, keepdim=True)  # E[x], E[x^2]: one pass
        mean, rstd = moments[0], (moments[1] - moments[0].square() + self.ln.eps).rsqrt()
        # the gain applied to x: n_embd products per row, not one per weight
        weight = getattr(self.linear, "laid_out", self.linear.weight)  # none laid out: as it is
        xw = layouts.matmul(layouts.scale(x, self.ln.weight), weight, dtype=dtypes.float)
        return (rstd * (xw - mean * self.colsum) + self.bias).cast(x.dtype)


class Attention:
    def __init__(self, cfg):
        self.n_head, self.n_embd, self.max_context = cfg.n_head, cfg.n_embd, cfg.n_positions
        self.c_attn = Linear(cfg.n_embd, 3 * cfg.n_embd)  # q, k and v in one matmul
        self.c_proj = Linear(cfg.n_embd, cfg.n_embd)
        self.cache = None  # made by GPT2.fold, in the weights' dtype, on their device

    def make_cache(self, dtype, device):  # with room for a padded chunk past the context
        hs = self.n_embd // self.n_head
        self.cache = layouts.make_cache(self.n_head, self.max_context + CHUNK, hs, dtype, device)
        return self.cache.buffers()

    def __call__(self, x):
        """Training and reference: the whole sequence at once, each position sees its past."""
        B, T, C = x.shape  # batch size, sequence length, embedding dimensionality (n_embd)
        qkv = self.c_attn(x).reshape(B, T, 3, self.n_head, C // self.n_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, nh, T, hs)
        y = q.scaled_dot_product_attention(k, v, is_causal=True)  # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def decode(self, x, start_pos, key_blocks, ln_1_c_attn):
        """T new positions from start_pos on, against the cached ones before them. `ln_1_c_attn`
        is c_attn(ln_1(x)), the block's norm folded in (NormLinear). `key_blocks`: how many
        blocks of KEY_BLOCK cached keys cover positions 0 .. start_pos + T - 1, a Variable like
        start_pos, so that one compiled call serves every position (only a CPU's cache reads it:
        layouts.BlockedKVCache)."""
        B, T, C = x.shape
        qkv = ln_1_c_attn(x).reshape(B, T, 3, self.n_head, C // self.n_head)
        y = self.cache.attend(qkv.permute(2, 0, 3, 1, 4), start_pos, key_blocks)  # (B, nh, T, hs)
        return self.c_proj.decode(y.transpose(1, 2).reshape(B, T, C))


class FeedForward:
    def __init__(self, cfg):
        self.c_fc = Linear(cfg.n_embd, cfg.n_inner or 4 * cfg.n_embd)
        self.c_proj = Linear(cfg.n_inner or 4 * cfg.n_embd, cfg.n_embd)
        self.approximate = "tanh" if cfg.activation_function in TANH_GELUS else "none"
        if cfg.activation_function not in TANH_GELUS + ("gelu",):
            raise ValueError(f"unsupported activation_function {cfg.activation_function!r}")

    def __call__(self, x):  # (B, T, n_embd) -> (B, T, n_inner) -> (B, T, n_embd)
        return self.c_proj(self.gelu(self.c_fc(x)))

    def decode(self, x, ln_2_c_fc):  # c_fc(ln_2(x)) folded, and GELU in a kernel of its own
        return self.c_proj.decode(layouts.kernel_of_its_own(self.gelu, ln_2_c_fc(x)))

    def gelu(self, x):
        return x.gelu(approximate=self.approximate)


class Block:
    """Pre-norm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, cfg):
        self.ln_1 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = Attention(cfg)
        self.ln_2 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = FeedForward(cfg)
        # the decoding path's norms, each folded into the matmul after it (NormLinear)
        self.ln_1_c_attn = NormLinear(self.ln_1, self.attn.c_attn)
        self.ln_2_c_fc = NormLinear(self.ln_2, self.mlp.c_fc)

    def __call__(self, x):  # (B, T, n_embd)
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def decode(self, x, start_pos, key_blocks):  # (1, T, n_embd)
        x = x + self.attn.decode(x, start_pos, key_blocks, self.ln_1_c_attn)
        return x + self.mlp.decode(x, self.ln_2_c_fc)


class GPT2:
    def __init__(self, cfg=Config(), buckets=BUCKETS, beam=0):
        self.config = cfg
        # the vocabulary padded to a multiple of 64 rows, as nanoGPT does: 3x faster head here
        self.wte = Embedding(padded_vocab(cfg), cfg.n_embd)
        self.wpe = Embedding(cfg.n_positions, cfg.n_embd)
        self.h = [Block(cfg) for _ in range(cfg.n_layer)]
        self.ln_f = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.ln_f_head = NormLinear(self.ln_f, TiedHead(self.wte))  # the head, tied to wte
        self.cached = []  # the tokens whose keys and values sit in the caches, in order
        self.computed = 0  # how many positions the last call ran through the model
        # a compiled call (TinyJit) per count of new tokens in `buckets`, built at its first use
        self.calls = runtime.CompiledCalls(self.decode, buckets, BUCKETS, cfg, beam)
        self.folded = False  # see `fold`: done with the first compiled call

    def forward(self, tokens):
        """Logits (B, T, vocab) of a (B, T) batch of whole sequences: training and reference."""
        x = self.wte(tokens) + self.wpe(Tensor.arange(tokens.shape[1]))  # (B, T, n_embd)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # the output head is tied to the embedding
        return logits[..., : self.config.vocab_size]  # (B, T, vocab_size)

    def decode(self, tokens, start_pos, key_blocks):
        """Logits (T, padded vocab) of T new tokens (1, T) at start_pos, start_pos + 1, ..."""
        # a padded chunk's last rows may pass the context: they reuse the last position
        pos = (Tensor.arange(tokens.shape[1]) + start_pos).minimum(self.config.n_positions - 1)
        x = self.wte(tokens) + self.wpe(pos)  # (1, T, n_embd)
        for block in self.h:
            x = block.decode(x, start_pos, key_blocks)
        return self.ln_f_head(x)[0].float().realize()  # (T, padded vocab)

    def __call__(self, tokens, start):
        """specmini's model protocol: the logits of tokens[start:], (len(tokens) - start, vocab)."""
        tokens = list(tokens)  # first: the checks below would use up a generator
        if not all(t is int or issubclass(t, np.integer) for t in set(map(type, tokens))):
            raise ValueError(f"token ids must be integers, got {tokens[:8]}...")
        if not 0 <= start <= len(tokens) or len(tokens) > self.config.n_positions:
            raise ValueError(
                f"need 0 <= start <= len(tokens) <= n_positions = {self.config.n_positions}, "
                f"got start={start}, len(tokens)={len(tokens)}"
            )
        # keep the cache for the longest common prefix (up to start): its ids passed these checks
        # when computed, so only the rest are range-checked (the types of all, since 1.0 == 1)
        kept = common_prefix(self.cached, tokens, start)
        tokens = self.cached[:kept] + list(map(int, tokens[kept:]))
        if not all(0 <= t < self.config.vocab_size for t in tokens[kept:]):
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size})")
        if start == len(tokens):
            return np.zeros((0, self.config.vocab_size), dtype=np.float32)
        self.computed = len(tokens) - kept
        self.cached, rows, chunk = tokens[:kept], [], self.calls.buckets[-1]
        for i in range(kept, len(tokens), chunk):
            rows.append(self.run(tokens[i : i + chunk], i))
            # only now are they cached: an exception or Ctrl-C before this line leaves `cached` true
            self.cached = tokens[: i + chunk]
        return np.concatenate(rows)[start - kept :]

    def run(self, chunk, pos):
        """One compiled call over up to buckets[-1] new tokens at positions pos, pos + 1, ..."""
        if not self.folded:
            self.fold()
        return self.calls(chunk, pos)[: len(chunk), : self.config.vocab_size]

    compiled = property(lambda self: self.calls.compiled)  # count of new tokens -> TinyJit
    buckets = property(lambda self: self.calls.buckets)

    def compile(self):
        """Build every compiled call now, so that no timed call pays for it (each is captured at
        its first run: runtime.capture_at_once, not run uncaptured once); the cache ends empty."""
        for n in self.calls.buckets:
            self.run([0] * n, 0)
        self.reset()
        return self

    def fold(self):
        """From the weights as they are now: the folded norms' sums (NormLinear.fold), the laid-out
        copies of the linear layers and the head (layouts.lay_out), the caches; weights' dtype."""
        # each weight its own buffer: new random weights are views of one, read 10x slower
        Tensor.realize(*[t.replace(t.contiguous()) for t in weights(self).values()])
        norms = [self.ln_f_head] + [n for b in self.h for n in (b.ln_1_c_attn, b.ln_2_c_fc)]
        mats = [m for b in self.h for m in (b.attn.c_attn, b.attn.c_proj, b.mlp.c_fc, b.mlp.c_proj)]
        linears = [*mats, self.ln_f_head.linear]  # the head too: a draft call 5-6% faster
        for linear in linears:
            linear.laid_out = layouts.lay_out(linear.weight)  # what `decode` reads
        w = self.wte.weight
        caches = [t for block in self.h for t in block.attn.make_cache(w.dtype, w.device)]
        # in one realize: each is scheduled and encoded apart, a large share of a model's build
        laid_out = [linear.laid_out for linear in linears]
        with runtime.compiling():  # its kernels kept on disk as a call's are: seconds a load
            Tensor.realize(*[t for n in norms for t in n.fold()], *laid_out, *caches)
        self.folded = True

    max_context = property(lambda self: self.config.n_positions)  # tokens a call may hold

    def reset(self):  # forget the cache (its buffers stay allocated and are overwritten)
        self.cached = []

    def read_prompt(self, prompt):  # into the cache; read again, it costs one position
        self(prompt, len(prompt) - 1)

    def weights_changed(self):
        """After any weight change, drop what the old weights built (calls, folded norms, cache)."""
        self.folded, self.cached = False, []
        self.calls.compiled.clear()
        for block in self.h:
            block.attn.cache = None  # in the weights' dtype

    def half(self):
        """fp16 weights (and so fp16 activations and cache): half the memory, faster on GPUs."""
        Tensor.realize(*[t.replace(t.half().contiguous()) for t in weights(self).values()])
        self.weights_changed()
        return self


def common_prefix(cached, tokens, limit):
    """How many leading tokens two texts share, at most `limit`: the cache entries to keep."""
    if cached[:limit] == tokens[: min(limit, len(cached))]:  # the usual case, compared at once
        return min(limit, len(cached))
    return first_difference(cached, tokens)  # which lies before min(limit, len(cached))


def padded_vocab(cfg):
    return -(-cfg.vocab_size // 64) * 64


def weights(model):
    """The learned tensors under the hub's names (neither the caches nor the folded norms)."""
    modules = {"wte": model.wte, "wpe": model.wpe, "h": model.h, "ln_f": model.ln_f}
    derived = {"cache", "ln_1_c_attn", "ln_2_c_fc", "laid_out"}
    return {k: v for k, v in get_state_dict(modules).items() if not set(k.split(".")) & derived}


def kernel_counts(model):
    """Kernels each compiled call launches, by its count of new tokens (a GPU pays per launch)."""
    return {n: ks for n, jit in sorted(model.compiled.items()) if (ks := runtime.kernels(jit))}
