"""GPT-2 in tinygrad, named like Hugging Face's checkpoints, with a KV cache for speculation.

The model only (`course.checkpoints` reads and writes its files, `course.tokenizers` makes its
tokens, `course.numpy_gpt2` is the same model in plain numpy).

A `GPT2` is a specmini model: `model(tokens, start)` returns the logits of tokens[start:], a
numpy array (len(tokens) - start, vocab). Parameter names (wte, wpe, h.N.attn.c_attn, ...) and
layouts (linear layers (in, out)) are the hub files'; the embedding's rows are padded to a
multiple of 64, for speed (`checkpoints` pads them).

Two forward passes: `forward`, the reference (whole sequences, as in training), and `step`, the
compiled decoding path: the same logits with a KV cache and each LayerNorm folded into the matmul
after it, in as few GPU kernels as tinygrad makes of it, from weights laid out for the device.
"""

from dataclasses import dataclass

import numpy as np
from tinygrad import Tensor, TinyJit, UOp, dtypes
from tinygrad.nn import Embedding, LayerNorm
from tinygrad.nn.state import get_state_dict

from course import runtime
from course.toys import first_difference, gpt2_parameters

runtime.install_kernel_rule()  # a CPU matmul's rows in registers: a pass over K + 1 ~ a step

TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")  # all three are the tanh formula
# new-token counts with a compiled call: each K + 1 up to K = 8, then 16 for prompts; others padded
BUCKETS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 16)
CHUNK = BUCKETS[-1]  # the most new positions per compiled call; longer inputs go in chunks


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
    `step`, for decoding, reads the copy that GPT2.fold lays out for the device (runtime.lay_out)"""

    def __init__(self, n_in, n_out):
        self.weight = Tensor.normal(n_in, n_out, std=0.02)
        self.bias = Tensor.zeros(n_out)

    def __call__(self, x):
        return x @ self.weight + self.bias

    def step(self, x):
        return runtime.matmul(x, self.laid_out) + self.bias


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

    def fold(self):
        ln, weight, bias = self.ln, self.linear.weight, getattr(self.linear, "bias", None)
        self.colsum = (ln.weight.float().reshape(-1, 1) * weight.float()).sum(0).contiguous()
        shift = ln.bias.float() @ weight.float()  # (out,), as colsum: once, at fold
        self.bias = (shift if bias is None else shift + bias.float()).contiguous()
        return self.colsum, self.bias

    def __call__(self, x):
        moments = Tensor.stack(x, x * x).float().mean(-1, keepdim=True)  # E[x], E[x^2]: one pass
        mean, rstd = moments[0], (moments[1] - moments[0].square() + self.ln.eps).rsqrt()
        # the gain applied to x: n_embd products per row, not one per weight; for several rows
        # stored first, or a CPU's matmul redoes them for every VECTOR outputs (5 rows: 1.7x longer)
        xg = x * self.ln.weight
        xg = xg.contiguous() if x.shape[-2] > 1 and runtime.on_cpu(x.device) else xg
        weight = getattr(self.linear, "laid_out", self.linear.weight)  # none laid out: as it is
        xw = runtime.matmul(xg, weight, dtype=dtypes.float)
        return (rstd * (xw - mean * self.colsum) + self.bias).cast(x.dtype)


class Attention:
    def __init__(self, cfg):
        self.n_head, self.n_embd, self.max_context = cfg.n_head, cfg.n_embd, cfg.n_positions
        self.c_attn = Linear(cfg.n_embd, 3 * cfg.n_embd)  # q, k and v in one matmul
        self.c_proj = Linear(cfg.n_embd, cfg.n_embd)
        self.qkv_cache = self.keys_by_block = None  # the caches, made by make_cache

    def __call__(self, x):
        """Training and reference: the whole sequence at once, each position sees its past."""
        B, T, C = x.shape  # batch size, sequence length, embedding dimensionality (n_embd)
        qkv = self.c_attn(x).reshape(B, T, 3, self.n_head, C // self.n_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, nh, T, hs)
        y = q.scaled_dot_product_attention(k, v, is_causal=True)  # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def make_cache(self, dtype, device):
        """q, k and v of every position, batch 1, with room for a padded chunk past the context
        (whole key blocks); on a CPU the keys again, in blocks (runtime.attend_in_blocks)."""
        room = runtime.n_key_blocks(self.max_context + CHUNK) * runtime.KEY_BLOCK
        shape = (3, 1, self.n_head, room, self.n_embd // self.n_head)
        self.qkv_cache = Tensor.zeros(*shape, dtype=dtype, device=device).contiguous()
        blocks = runtime.keys_by_block(self.qkv_cache[1]).contiguous()  # realized by GPT2.fold
        self.keys_by_block = blocks if runtime.on_cpu(device) else None
        return [t for t in (self.qkv_cache, self.keys_by_block) if t is not None]

    def step(self, ln_1_c_attn, x, start_pos, blocks):
        """Decoding: T new positions from start_pos on, against the cached ones before them.
        `ln_1_c_attn` is c_attn(ln_1(x)), the block's norm folded in (NormLinear); `blocks` of
        runtime.KEY_BLOCK keys hold positions 0 .. start_pos + T - 1 (a CPU reads them)."""
        B, T, C = x.shape
        nh, hs, end = self.n_head, C // self.n_head, start_pos + T
        # q is cached too, so that the matmul writes its whole output straight into the cache
        qkv = ln_1_c_attn(x).reshape(B, T, 3, nh, hs).permute(2, 0, 3, 1, 4)  # (3, B, nh, T, hs)
        self.qkv_cache[:, :, :, start_pos:end, :].assign(qkv)
        q = self.qkv_cache[0, :, :, start_pos:end, :]  # (B, nh, T, hs)
        if runtime.on_cpu(x.device):  # over whole blocks of keys, without q @ k.T's division
            y = runtime.attend_in_blocks(q, self.qkv_cache, self.keys_by_block, start_pos, blocks)
            return self.c_proj.step(y.transpose(1, 2).reshape(B, T, C))
        k = self.qkv_cache[1, :, :, :end, :]  # (B, nh, end, hs)
        v = self.qkv_cache[2, :, :, :end, :]  # (B, nh, end, hs)
        att = q @ k.transpose(-1, -2) * (1 / hs**0.5)  # (B, nh, T, end)
        if T > 1:  # new token i sits at position start_pos + i and sees keys 0 .. start_pos + i
            keys = Tensor.arange(self.qkv_cache.shape[3])[:end]  # arange(end) would be O(end^2)
            future = keys.reshape(1, end) > Tensor.arange(T).reshape(T, 1) + start_pos
            att = future.where(float("-inf"), att)  # compared in place: no mask buffer
        # softmax, divided after the sum over keys: one kernel less than softmax(att) @ v
        weights = (att - att.max(-1, keepdim=True)).exp()
        y = (weights @ v) / weights.sum(-1, keepdim=True)  # (B, nh, T, hs)
        return self.c_proj.step(y.transpose(1, 2).reshape(B, T, C))


class FeedForward:
    def __init__(self, cfg):
        self.c_fc = Linear(cfg.n_embd, cfg.n_inner or 4 * cfg.n_embd)
        self.c_proj = Linear(cfg.n_inner or 4 * cfg.n_embd, cfg.n_embd)
        self.approximate = "tanh" if cfg.activation_function in TANH_GELUS else "none"
        if cfg.activation_function not in TANH_GELUS + ("gelu",):
            raise ValueError(f"unsupported activation_function {cfg.activation_function!r}")

    def __call__(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))

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

    def __call__(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def step(self, x, start_pos, blocks):
        """The same block with a KV cache: ln_1 and ln_2 folded into c_attn and c_fc."""
        x = x + self.attn.step(self.ln_1_c_attn, x, start_pos, blocks)
        return x + self.mlp.c_proj.step(runtime.kernel_of_its_own(self.mlp.gelu, self.ln_2_c_fc(x)))


class GPT2:
    def __init__(self, cfg=Config(), buckets=BUCKETS, beam=0):
        self.config, self.beam = cfg, beam  # beam: see `run`
        # the vocabulary padded to a multiple of 64 rows, as nanoGPT does: 3x faster head here
        self.wte = Embedding(padded_vocab(cfg), cfg.n_embd)
        self.wpe = Embedding(cfg.n_positions, cfg.n_embd)
        self.h = [Block(cfg) for _ in range(cfg.n_layer)]
        self.ln_f = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.ln_f_head = NormLinear(self.ln_f, TiedHead(self.wte))  # the head, tied to wte
        self.cached = []  # the tokens whose keys and values sit in the caches, in order
        self.computed = 0  # how many positions the last call ran through the model
        # one compiled call (TinyJit) per count of new tokens, `buckets`: as a Variable, a count
        # would give every kernel a launch grid empty at 0, which CUDA graphs refuse
        if not set(buckets) <= set(BUCKETS) or 1 not in buckets:
            raise ValueError(f"buckets must include 1 and be among {BUCKETS}, got {buckets}")
        self.buckets = tuple(sorted(buckets))
        position = UOp.variable("start_pos", 0, cfg.n_positions - 1)
        blocks = UOp.variable("key_blocks", 1, runtime.n_key_blocks(cfg.n_positions + CHUNK))
        tokens = [UOp.variable(f"token{i}", 0, cfg.vocab_size - 1) for i in range(CHUNK)]
        self.variables = [position, blocks, *tokens]  # `step`'s arguments, in order
        self.compiled = {}  # new-token count -> TinyJit
        self.folded = False  # see `fold`: done with the first compiled call

    def forward(self, tokens):
        """Logits (B, T, vocab) of a (B, T) batch of whole sequences: training and reference."""
        x = self.wte(tokens) + self.wpe(Tensor.arange(tokens.shape[1]))  # (B, T, n_embd)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # the output head is tied to the embedding
        return logits[..., : self.config.vocab_size]  # (B, T, vocab_size)

    def step(self, start_pos, blocks, *tokens):
        """len(tokens) new tokens at start_pos, start_pos + 1, ...; their logits (T, vocab)."""
        x = Tensor.stack(*[Tensor(t) for t in tokens]).cast(dtypes.int32).reshape(1, len(tokens))
        # a padded chunk's last rows may pass the context: they reuse the last position
        pos = (Tensor.arange(len(tokens)) + start_pos).minimum(self.config.n_positions - 1)
        x = self.wte(x) + self.wpe(pos)  # (1, T, n_embd)
        for block in self.h:
            x = block.step(x, start_pos, blocks)
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
        self.cached, rows, chunk = tokens[:kept], [], self.buckets[-1]
        for i in range(kept, len(tokens), chunk):
            rows.append(self.run(tokens[i : i + chunk], i))
            # only now are they cached: an exception or Ctrl-C before this line leaves `cached` true
            self.cached = tokens[: i + chunk]
        return np.concatenate(rows)[start - kept :]

    def run(self, chunk, pos):
        """One compiled call over up to buckets[-1] new tokens at positions pos, pos + 1, ..."""
        if not self.folded:
            self.fold()
        size = next(b for b in self.buckets if b >= len(chunk))
        if size not in self.compiled:  # captured at its first call: the caches exist (fold)
            self.compiled[size] = TinyJit(self.step)
            runtime.capture_at_once(self.compiled[size])
        # padding (id 0) fills the bucket: its rows are dropped, its cache entries overwritten
        padded = chunk + [0] * (size - len(chunk))
        blocks = runtime.n_key_blocks(pos + size)  # the keys up to the last new position
        values = dict(zip(self.variables, [pos, blocks, *padded], strict=False))
        logits = runtime.run(self.compiled[size], values, self.beam)  # beam > 0: kernel search
        return logits[: len(chunk), : self.config.vocab_size]

    def compile(self):
        """Build every compiled call now, so that no timed call pays for it (each is captured at
        its first run: runtime.capture_at_once, not run uncaptured once); the cache ends empty."""
        for n in self.buckets:
            self.run([0] * n, 0)
        self.reset()
        return self

    def fold(self):
        """From the weights as they are now: the folded norms' sums (NormLinear.fold), the laid-out
        copies of the linear layers and the head (runtime.lay_out), the caches; weights' dtype."""
        # each weight its own buffer: new random weights are views of one, read 10x slower
        Tensor.realize(*[t.replace(t.contiguous()) for t in weights(self).values()])
        norms = [self.ln_f_head] + [n for b in self.h for n in (b.ln_1_c_attn, b.ln_2_c_fc)]
        mats = [m for b in self.h for m in (b.attn.c_attn, b.attn.c_proj, b.mlp.c_fc, b.mlp.c_proj)]
        linears = [*mats, self.ln_f_head.linear]  # the head too: a draft call 5-6% faster
        for linear in linears:
            linear.laid_out = runtime.lay_out(linear.weight)  # what `step` reads
        w, laid_out = self.wte.weight, [linear.laid_out for linear in linears]
        caches = [t for b in self.h for t in b.attn.make_cache(w.dtype, w.device)]
        # in one realize: each is scheduled and encoded apart, a large share of a model's build
        Tensor.realize(*[t for n in norms for t in n.fold()], *laid_out, *caches)
        self.folded = True

    max_context = property(lambda self: self.config.n_positions)  # tokens a call may hold

    def reset(self):  # forget the cache (its buffers stay allocated and are overwritten)
        self.cached = []

    def weights_changed(self):
        """After any weight change, drop what the old weights built (calls, folded norms, cache)."""
        self.compiled, self.folded, self.cached = {}, False, []
        for block in self.h:
            block.attn.qkv_cache = block.attn.keys_by_block = None  # in the weights' dtype

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
    derived = {"qkv_cache", "keys_by_block", "ln_1_c_attn", "ln_2_c_fc", "laid_out"}
    return {k: v for k, v in get_state_dict(modules).items() if not set(k.split(".")) & derived}


def kernel_counts(model):
    """Kernels each compiled call launches, by its count of new tokens (a GPU pays per launch)."""
    return {n: ks for n, jit in sorted(model.compiled.items()) if (ks := runtime.kernels(jit))}
