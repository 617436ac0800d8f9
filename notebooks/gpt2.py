"""GPT-2 in tinygrad, named like Hugging Face's checkpoints, with a KV cache for speculation.

`load(name_or_dir)` returns a `GPT2` that is a specmini model: `model(tokens, start)` returns the
logits of tokens[start:] as a numpy array of shape (len(tokens) - start, vocab). The parameter
names (wte, wpe, h.N.attn.c_attn, ...) are those of the safetensors files on the hub. Two layouts
differ, for speed, and `load_state` / `hf_state_dict` convert them: the linear layers are held
(out, in) where the files' Conv1D layers are (in, out), and the embedding's rows are padded to a
multiple of 64.

Two forward passes: `forward` is the reference (whole sequences, as in training), and the
compiled decoding path (`step`) computes the same logits with a KV cache, each LayerNorm folded
into the matmul after it, in as few GPU kernels as tinygrad can make of it.
"""

import hashlib
import json
import os
import pathlib
import tempfile
import urllib.request
from dataclasses import dataclass, fields

import numpy as np
from tinygrad import Tensor, TinyJit, UOp, dtypes
from tinygrad.nn import Embedding, LayerNorm
from tinygrad.nn.state import get_state_dict, safe_load, safe_save

NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "distilgpt2")
HUB = "https://huggingface.co/{name}/resolve/main/{file}"
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")  # all three are the tanh formula
BUCKETS = (1, 2, 4, 8, 16)  # new-token counts with a compiled call; others are padded up
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

    @classmethod
    def from_json(cls, path):
        try:
            raw = json.loads(pathlib.Path(path).read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path} is not a JSON file ({e})") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{path} must hold a JSON object, got {type(raw).__name__}")
        try:
            return cls(**{f.name: raw[f.name] for f in fields(cls) if raw.get(f.name) is not None})
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

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
        """The weights of a GPT-2 of this shape, as its files count them (the head is tied to
        the token embedding): embeddings, per block attention, MLP and two LayerNorms, the
        final LayerNorm."""
        d, inner = self.n_embd, self.n_inner or 4 * self.n_embd
        block = (4 * d * d + 4 * d) + (2 * d * inner + inner + d) + 4 * d
        return (self.vocab_size + self.n_positions) * d + self.n_layer * block + 2 * d


class Linear:
    """x @ weight.T + bias, the weight stored (out, in) as in PyTorch's nn.Linear and nanoGPT.

    GPT-2's files store these four layers as Conv1D, (in, out), from its TensorFlow days;
    `load_state` and `hf_state_dict` transpose them. Stored (out, in), each output is a dot
    product over contiguous memory, which tinygrad's CPU kernels run about 3x faster.
    """

    def __init__(self, n_in, n_out):
        # drawn (in, out) and transposed: the same initial weights as GPT-2's own layout gives
        self.weight = Tensor.normal(n_in, n_out, std=0.02).T.contiguous()
        self.bias = Tensor.zeros(n_out)

    def __call__(self, x):
        return x @ self.weight.T + self.bias


class NormLinear:
    """layer_norm(x) @ W + b in one kernel: the norm folded into the matmul that follows it.

    With g, s the norm's gain and shift, mean and rstd = 1 / std of each row of x, and W
    stored (in, out) for the formula (here it is W.T, see Linear):
        layer_norm(x) @ W + b  =  rstd * (x @ (g W) - mean * colsum(g W))  +  (s @ W + b)
    so the matmul reads x as it is and the norm becomes two numbers per row, applied after the
    sum. Unfolded, a GPU runs three more kernels (mean, variance, normalise) per norm.
    """

    def __init__(self, ln, weight, bias=None):  # weight (out, in)
        self.eps, self.gain, self.weight = ln.eps, ln.weight, weight
        self.colsum = (weight.float() * ln.weight.float()).sum(1).contiguous()  # (out,), once
        shift = weight.float() @ ln.bias.float()
        self.bias = (shift if bias is None else shift + bias.float()).contiguous()

    def __call__(self, x):
        moments = Tensor.stack(x, x * x).float().mean(-1, keepdim=True)  # E[x], E[x^2]: one pass
        mean, rstd = moments[0], (moments[1] - moments[0].square() + self.eps).rsqrt()
        xw = x.matmul((self.weight * self.gain).T, dtype=dtypes.float)  # gain applied as W is read
        return (rstd * (xw - mean * self.colsum) + self.bias).cast(x.dtype)


class Attention:
    def __init__(self, cfg):
        self.n_head, self.max_context = cfg.n_head, cfg.n_positions
        self.c_attn = Linear(cfg.n_embd, 3 * cfg.n_embd)  # q, k and v in one matmul
        self.c_proj = Linear(cfg.n_embd, cfg.n_embd)
        self.cache = None  # q, k and v of every position, made by the first decoding step

    def __call__(self, x):
        """Training and reference: the whole sequence at once, each position sees its past."""
        B, T, C = x.shape
        qkv = self.c_attn(x).reshape(B, T, 3, self.n_head, C // self.n_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, n_head, T, head_size)
        y = q.scaled_dot_product_attention(k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def step(self, qkv_of, x, start_pos):
        """Decoding: T new positions from start_pos on, against the cached ones before them."""
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        end = start_pos + T
        if self.cache is None:  # room for a padded chunk past the context
            shape = (3, B, H, self.max_context + CHUNK, D)
            self.cache = Tensor.zeros(*shape, dtype=x.dtype, device=x.device).contiguous()
            self.cache.realize()
        # q is cached too, so that the matmul writes its whole output straight into the cache
        qkv = qkv_of(x).reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4)  # (3, B, H, T, D)
        self.cache[:, :, :, start_pos:end, :].assign(qkv)
        q = self.cache[0, :, :, start_pos:end, :]  # (B, H, T, D)
        keys, values = self.cache[1, :, :, :end, :], self.cache[2, :, :, :end, :]  # (B, H, end, D)
        scores = q @ keys.transpose(-1, -2) * (1 / D**0.5)  # (B, H, T, end)
        if T > 1:  # new token i sits at position start_pos + i and sees keys 0 .. start_pos + i
            future = Tensor.arange(end).reshape(1, end) > Tensor.arange(T).reshape(T, 1) + start_pos
            scores = future.where(float("-inf"), scores)  # compared in place: no mask buffer
        # softmax, divided after the sum over keys: one kernel less than softmax(scores) @ values
        weights = (scores - scores.max(-1, keepdim=True)).exp()
        y = (weights @ values) / weights.sum(-1, keepdim=True)  # (B, H, T, D)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class FeedForward:
    def __init__(self, cfg):
        self.c_fc = Linear(cfg.n_embd, cfg.n_inner or 4 * cfg.n_embd)
        self.c_proj = Linear(cfg.n_inner or 4 * cfg.n_embd, cfg.n_embd)
        self.approximate = "tanh" if cfg.activation_function in TANH_GELUS else "none"
        if cfg.activation_function not in TANH_GELUS + ("gelu",):
            raise ValueError(f"unsupported activation_function {cfg.activation_function!r}")

    def __call__(self, x, fc=None):
        return self.c_proj((fc or self.c_fc)(x).gelu(approximate=self.approximate))


class Block:
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg):
        self.ln_1 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = Attention(cfg)
        self.ln_2 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = FeedForward(cfg)

    def __call__(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def step(self, x, start_pos):
        """The same block with a KV cache, each norm folded into the matmul after it."""
        x = x + self.attn.step(self.ln_1_attn, x, start_pos)
        return x + self.mlp(x, fc=self.ln_2_fc)

    def fold(self):
        self.ln_1_attn = NormLinear(self.ln_1, self.attn.c_attn.weight, self.attn.c_attn.bias)
        self.ln_2_fc = NormLinear(self.ln_2, self.mlp.c_fc.weight, self.mlp.c_fc.bias)
        return [self.ln_1_attn, self.ln_2_fc]


class GPT2:
    def __init__(self, cfg=Config()):
        self.config = cfg
        # the vocabulary padded to a multiple of 64 rows, as nanoGPT does (50257 -> 50304): the
        # output head then splits evenly over CPU threads and vector lanes (3x faster here)
        self.wte = Embedding(padded_vocab(cfg), cfg.n_embd)
        self.wpe = Embedding(cfg.n_positions, cfg.n_embd)
        self.h = [Block(cfg) for _ in range(cfg.n_layer)]
        self.ln_f = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.cached = []  # the tokens whose keys and values sit in the caches, in order
        self.computed = 0  # how many positions the last call ran through the model
        # TinyJit replays the kernels it captured for one shape: one compiled call per count of
        # new tokens (BUCKETS). A count that is a Variable would give every kernel a launch grid
        # that is empty when the Variable is 0, which CUDA graphs refuse. The position and the
        # token ids enter as Variables bound to numbers (a Tensor from a list costs a step).
        self.pos_var = UOp.variable("start_pos", 0, cfg.n_positions - 1)
        self.token_vars = [UOp.variable(f"token{i}", 0, cfg.vocab_size - 1) for i in range(CHUNK)]
        self.compiled = {}  # new-token count -> TinyJit
        self.head = None  # ln_f folded into the output head, made with the compiled calls

    def forward(self, tokens):
        """Logits (B, T, vocab) of a (B, T) batch of whole sequences: training and reference."""
        x = self.wte(tokens) + self.wpe(Tensor.arange(tokens.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # the output head is tied to the embedding
        return logits[..., : self.config.vocab_size]

    def step(self, start_pos, *tokens):
        """len(tokens) new tokens at start_pos, start_pos + 1, ...; their logits (T, vocab)."""
        x = Tensor.stack(*[Tensor(t) for t in tokens]).cast(dtypes.int32).reshape(1, len(tokens))
        # a padded chunk's last rows may pass the context: they reuse the last position
        pos = (Tensor.arange(len(tokens)) + start_pos).minimum(self.config.n_positions - 1)
        x = self.wte(x) + self.wpe(pos)
        for block in self.h:
            x = block.step(x, start_pos)
        return self.head(x)[0].float().realize()

    def __call__(self, tokens, start):
        """specmini's model protocol: the logits of tokens[start:], (len(tokens) - start, vocab)."""
        if not all(isinstance(t, int | np.integer) and not isinstance(t, bool) for t in tokens):
            raise ValueError(f"token ids must be integers, got {list(tokens)[:8]}...")
        tokens = [int(t) for t in tokens]
        if not 0 <= start <= len(tokens) or len(tokens) > self.config.n_positions:
            raise ValueError(
                f"need 0 <= start <= len(tokens) <= n_positions = {self.config.n_positions}, "
                f"got start={start}, len(tokens)={len(tokens)}"
            )
        if not all(0 <= t < self.config.vocab_size for t in tokens):
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size})")
        if start == len(tokens):
            return np.zeros((0, self.config.vocab_size), dtype=np.float32)
        # keep the cache for the longest common prefix (up to start); recompute all after it
        kept = 0
        while kept < min(start, len(self.cached)) and self.cached[kept] == tokens[kept]:
            kept += 1
        self.computed = len(tokens) - kept
        self.cached, rows = tokens[:kept], []
        for i in range(kept, len(tokens), CHUNK):
            rows.append(self.run(tokens[i : i + CHUNK], i))
            # only now are these positions' keys and values in the cache: an exception or a
            # Ctrl-C before this line leaves `cached` naming what the cache really holds
            self.cached = tokens[: i + CHUNK]
        return np.concatenate(rows)[start - kept :]

    def run(self, chunk, pos):
        """One compiled call over up to CHUNK new tokens at positions pos, pos + 1, ..."""
        if self.head is None:
            self.fold()
        size = next(b for b in BUCKETS if b >= len(chunk))
        if size not in self.compiled:
            self.compiled[size] = TinyJit(self.step)
        # padding tokens (id 0) fill the bucket; their rows are dropped and their cache
        # entries, past the real ones, are overwritten before any later call reads them
        padded = chunk + [0] * (size - len(chunk))
        tokens = [v.bind(t) for v, t in zip(self.token_vars, padded, strict=False)]
        logits = self.compiled[size](self.pos_var.bind(pos), *tokens).numpy()
        return logits[: len(chunk), : self.config.vocab_size]

    def fold(self):
        """The decoding path's folded norms (NormLinear), from the weights as they are now."""
        # Each weight its own contiguous buffer: freshly initialised random weights are lazy
        # views of a larger random buffer, which compiled calls would read 10x slower
        Tensor.realize(*[t.replace(t.contiguous()) for t in weights(self).values()])
        head = NormLinear(self.ln_f, self.wte.weight)  # tied: the embedding is (vocab, n_embd)
        folded = [head] + [t for block in self.h for t in block.fold()]
        Tensor.realize(*[t for f in folded for t in (f.colsum, f.bias)])
        self.head = head

    @property
    def max_context(self):
        """The longest sequence the model reads: prompt + new tokens must fit in it."""
        return self.config.n_positions

    def reset(self):
        """Forget the cache (its buffers stay allocated and are overwritten)."""
        self.cached = []

    def weights_changed(self):
        """Drop what was built from the old weights: compiled calls, folded norms, the cache.

        A compiled call replays kernels on the buffers it captured, so without this a call
        after `half()` or `load_state` would still read the old weights.
        """
        self.compiled, self.head, self.cached = {}, None, []
        for block in self.h:
            block.attn.cache = None  # its dtype follows the weights'

    def half(self):
        """fp16 weights (and so fp16 activations and cache): half the memory, faster on GPUs."""
        for t in weights(self).values():
            t.replace(t.half().contiguous().realize())
        self.weights_changed()
        return self


def check_fits(model, prompt, max_new_tokens):
    """Refuse, before any work, a generation that would outgrow the model's context.

    The last new token is sampled, never fed back, so prompt + max_new_tokens - 1 tokens must fit.
    """
    needed = len(prompt) + max_new_tokens - 1
    if needed > model.max_context:
        raise ValueError(
            f"{len(prompt)} prompt tokens + {max_new_tokens} new ones need a context of {needed}, "
            f"but the model reads at most {model.max_context}: shorten one or the other"
        )


def kernel_counts(model):
    """Kernels each compiled call launches, by its count of new tokens (CUDA graph batches opened).

    A GPU pays a launch per kernel, so this count, not the bytes, sets a small model's step time.
    """
    from tinygrad.uop.ops import Ops

    def programs(linear):
        for call in linear.src:
            fn = call.src[0]
            if fn.op is Ops.CUSTOM_FUNCTION and fn.arg == "graph":
                yield from programs(fn.src[0])
            elif fn.op is Ops.PROGRAM:
                yield fn.arg

    return {n: list(programs(jit.captured.linear)) for n, jit in sorted(model.compiled.items())
            if jit.captured is not None}  # fmt: skip


# ---------- loading ----------


def weights(model):
    """The learned tensors under the hub's names (the KV caches are not weights)."""
    modules = {"wte": model.wte, "wpe": model.wpe, "h": model.h, "ln_f": model.ln_f}
    derived = ("cache", "ln_1_attn", "ln_2_fc")  # the KV cache and the folded norms
    return {
        k: v for k, v in get_state_dict(modules).items() if not set(k.split(".")) & set(derived)
    }


CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def padded_vocab(cfg):
    return -(-cfg.vocab_size // 64) * 64


def hf_layout(cfg, key, tensor):
    """A weight as GPT-2's files hold it: Conv1D layers (in, out), the vocabulary unpadded."""
    if key == "wte.weight":
        return tensor[: cfg.vocab_size]
    return tensor.T if key.endswith(CONV1D) else tensor


def model_layout(cfg, key, tensor):
    """The inverse of hf_layout: how GPT2 holds a weight read from GPT-2's files."""
    if key == "wte.weight":
        return tensor.pad(((0, padded_vocab(cfg) - cfg.vocab_size), (0, 0)))
    return tensor.T if key.endswith(CONV1D) else tensor


def hf_state_dict(model, prefix="transformer."):
    """The model's weights under save_pretrained's names (tied head left out, as it does)."""
    return {prefix + k: hf_layout(model.config, k, v) for k, v in weights(model).items()}


def save(model, directory, extra_config=None):
    """Write config.json and model.safetensors the way save_pretrained does, for `load` to read."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cfg = {f.name: getattr(model.config, f.name) for f in fields(model.config)}
    cfg = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        **cfg,
        **(extra_config or {}),
    }
    (directory / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    weights = {k: v.float().contiguous() for k, v in hf_state_dict(model).items()}
    safe_save(weights, str(directory / "model.safetensors"), metadata={"format": "pt"})


def rename(key):
    """Hub keys have no prefix; save_pretrained's start with `transformer.`."""
    return key.removeprefix("transformer.")


def load_state(model, state, source):
    """Copy a safetensors state dict into the model, checking names and shapes."""
    expected = weights(model)
    got = {rename(k): v for k, v in state.items()}
    # the causal-mask buffers are constants, and lm_head is tied to wte: neither is a weight here
    got = {k: v for k, v in got.items() if not k.endswith((".attn.bias", ".attn.masked_bias"))}
    head = got.pop("lm_head.weight", None)
    missing, unexpected = sorted(expected.keys() - got.keys()), sorted(got.keys() - expected.keys())
    if missing or unexpected:
        raise ValueError(f"{source}: missing weights {missing[:5]}, unexpected {unexpected[:5]}")
    cfg = model.config
    for k, t in expected.items():
        if hf_layout(cfg, k, t).shape != got[k].shape:
            shape = hf_layout(cfg, k, t).shape
            raise ValueError(f"{source}: {k} has shape {got[k].shape}, expected {shape}")
        t.replace(model_layout(cfg, k, got[k]).to(t.device).cast(t.dtype).contiguous())
    if head is not None and not np.array_equal(head.numpy(), got["wte.weight"].numpy()):
        raise ValueError(f"{source}: lm_head.weight differs from wte.weight; GPT-2 ties them")
    Tensor.realize(*expected.values())
    model.weights_changed()
    return model


def cache_dir():
    """Where downloads are kept: tinygrad's cache folder (~/.cache/tinygrad/downloads)."""
    from tinygrad.helpers import _ensure_downloads_dir

    return _ensure_downloads_dir()


def fetch(url, path):
    """Download url to path, with a progress bar, unless it is there already.

    The bytes go to a `.part` file first and are moved into place only once their count (and
    the hub's sha256, when the response names one) is right: Python's HTTP client does not
    raise when a connection closes early, and a partial file in the cache would break every
    later load.
    """
    from tqdm.auto import tqdm

    path = pathlib.Path(path)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "specmini"})
        with urllib.request.urlopen(request, timeout=30) as r, open(part, "wb") as f:
            size = int(r.headers.get("Content-Length") or 0)
            tag = (r.headers.get("X-Linked-Etag") or r.headers.get("ETag") or "").strip('"')
            sha = hashlib.sha256()
            with tqdm(total=size or None, unit="B", unit_scale=True, desc=path.name) as bar:
                while chunk := r.read(1 << 20):
                    f.write(chunk), sha.update(chunk), bar.update(len(chunk))
        if size and part.stat().st_size != size:
            raise ConnectionError(f"the download stopped at {part.stat().st_size} of {size} bytes")
        if (
            len(tag) == 64 and tag != sha.hexdigest()
        ):  # the hub's ETag of a large file is its sha256
            raise ConnectionError(f"sha256 {sha.hexdigest()} differs from the hub's {tag}")
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)
    return path


def read_safetensors(path):
    """The tensors of a safetensors file, or one clear error if it is truncated or corrupt."""
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if not 0 < n <= os.path.getsize(path) - 8:
                raise ValueError(f"a header of {n} bytes in a file of {os.path.getsize(path)}")
            header = json.loads(f.read(n))
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
        if 8 + n + max(ends, default=0) != os.path.getsize(path):
            raise ValueError(
                f"{os.path.getsize(path)} bytes, the header describes {8 + n + max(ends)}"
            )
        return safe_load(str(path))
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(
            f"{path} is not a complete safetensors file ({e}); delete it and download it again"
        ) from None


def download(name, file):
    """Fetch one file of a hub model (cached, with a progress bar), or say clearly why not."""
    url, path = HUB.format(name=name, file=file), cache_dir() / name / file
    try:
        return fetch(url, path)  # returns at once when the file is already in the cache
    except OSError as e:  # URLError, timeouts and refused connections are all OSErrors
        raise ConnectionError(
            f"could not download {url} ({e}); place config.json and model.safetensors in "
            f"{cache_dir() / name} (the cache folder), or use a local directory instead"
        ) from e


def load(name_or_dir, half=False):
    """A GPT2 from a hub name (`gpt2`, ..., `gpt2-xl`) or a directory holding a HF checkpoint.

    It lives on tinygrad's default device: a GPU when there is one (choose with DEV=CUDA etc.).
    """
    if str(name_or_dir) in NAMES:
        config_path, weights_path = (
            download(str(name_or_dir), f) for f in ("config.json", "model.safetensors")
        )
    else:
        directory = pathlib.Path(name_or_dir)
        if not directory.is_dir():
            raise FileNotFoundError(
                f"{name_or_dir!r} is neither a model name ({', '.join(NAMES)}) nor a directory"
            )
        config_path, weights_path = directory / "config.json", directory / "model.safetensors"
        for p in (config_path, weights_path):
            if not p.is_file():
                raise FileNotFoundError(
                    f"{p} not found: a model directory needs config.json and model.safetensors "
                    "(pickled .bin checkpoints are not loaded: unpickling can run code)"
                )
    cfg = Config.from_json(config_path)
    model = load_state(GPT2(cfg), read_safetensors(weights_path), weights_path)
    return model.half() if half else model


# ---------- tokenizers ----------


class ByteTokenizer:
    """The offline pair's tokens: the bytes of UTF-8 text (vocab 256)."""

    n_vocab = 256

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, tokens):
        return bytes(tokens).decode("utf-8", errors="replace")


def gpt2_tokenizer():
    """tiktoken's `gpt2` BPE; it downloads its vocabulary files once and caches them."""
    import tiktoken

    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as e:  # tiktoken raises requests' errors or its own, depending on the version
        default = os.path.join(tempfile.gettempdir(), "data-gym-cache")
        cache = (
            os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or default
        )
        raise ConnectionError(
            "could not get tiktoken's gpt2 encoding (it downloads vocab.bpe and encoder.json from "
            f"openaipublic.blob.core.windows.net once, then caches them in {cache}): {e}"
        ) from e
