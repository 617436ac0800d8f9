"""GPT-2 in tinygrad, laid out like Hugging Face's checkpoints, with a KV cache for speculation.

`load(name_or_dir)` returns a `GPT2` that is a specmini model: `model(tokens, start)` returns the
logits of tokens[start:] as a numpy array of shape (len(tokens) - start, vocab). The parameter
names (wte, wpe, h.N.attn.c_attn, ...) and the Conv1D weight layout (in, out) are those of the
safetensors files on the hub, so loading is a rename at most, never a transpose.
"""

import json
import os
import pathlib
import tempfile
from dataclasses import dataclass, fields

import numpy as np
from tinygrad import Tensor, TinyJit, UOp, dtypes
from tinygrad.helpers import fetch
from tinygrad.nn import Embedding, LayerNorm
from tinygrad.nn.state import get_state_dict, safe_load, safe_save

NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "distilgpt2")
HUB = "https://huggingface.co/{name}/resolve/main/{file}"
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")  # all three are the tanh formula
CHUNK = 16  # the most new positions per compiled call; longer inputs go through in chunks


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
        raw = json.loads(pathlib.Path(path).read_text())
        return cls(**{f.name: raw[f.name] for f in fields(cls) if raw.get(f.name) is not None})


class Conv1D:
    """A Linear layer whose weight is stored (in, out), as in GPT-2's original TensorFlow code."""

    def __init__(self, n_in, n_out):
        self.weight = Tensor.normal(n_in, n_out, std=0.02)
        self.bias = Tensor.zeros(n_out)

    def __call__(self, x):
        return x @ self.weight + self.bias


class Attention:
    def __init__(self, cfg):
        self.n_head, self.max_context = cfg.n_head, cfg.n_positions
        self.c_attn = Conv1D(cfg.n_embd, 3 * cfg.n_embd)  # q, k and v in one matmul
        self.c_proj = Conv1D(cfg.n_embd, cfg.n_embd)

    def __call__(self, x, start_pos=None):
        B, T, C = x.shape
        q, k, v = (
            self.c_attn(x).reshape(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        )
        if start_pos is None:  # training: the whole sequence at once, each position sees its past
            y = q.scaled_dot_product_attention(k, v, is_causal=True)
        else:  # decoding: keys and values of earlier positions come from the cache
            if not hasattr(self, "cache_kv"):
                shape = (2, B, self.n_head, self.max_context, C // self.n_head)
                self.cache_kv = Tensor.zeros(*shape, dtype=x.dtype, device=x.device).contiguous()
                self.cache_kv.realize()
            end = start_pos + T
            self.cache_kv[:, :, :, start_pos:end, :].assign(Tensor.stack(k, v)).realize()
            keys, values = self.cache_kv[0, :, :, 0:end, :], self.cache_kv[1, :, :, 0:end, :]
            # new token i sits at position start_pos + i and may look at keys 0 .. start_pos + i
            mask = None
            if not isinstance(T, int) or T > 1:  # T may be symbolic: a Variable under the JIT
                mask = Tensor.full((1, 1, T, end), float("-inf"), dtype=x.dtype).triu(start_pos + 1)
            y = q.scaled_dot_product_attention(keys, values, attn_mask=mask)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class FeedForward:
    def __init__(self, cfg):
        self.c_fc = Conv1D(cfg.n_embd, cfg.n_inner or 4 * cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_inner or 4 * cfg.n_embd, cfg.n_embd)
        self.approximate = "tanh" if cfg.activation_function in TANH_GELUS else "none"
        if cfg.activation_function not in TANH_GELUS + ("gelu",):
            raise ValueError(f"unsupported activation_function {cfg.activation_function!r}")

    def __call__(self, x):
        return self.c_proj(self.c_fc(x).gelu(approximate=self.approximate))


class Block:
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg):
        self.ln_1 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = Attention(cfg)
        self.ln_2 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = FeedForward(cfg)

    def __call__(self, x, start_pos=None):
        x = x + self.attn(self.ln_1(x), start_pos)
        return x + self.mlp(self.ln_2(x))


class GPT2:
    def __init__(self, cfg=Config()):
        self.config = cfg
        self.wte = Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = Embedding(cfg.n_positions, cfg.n_embd)
        self.h = [Block(cfg) for _ in range(cfg.n_layer)]
        self.ln_f = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.cached = []  # the tokens whose keys and values sit in the caches, in order
        self.computed = 0  # how many positions the last call ran through the model
        # TinyJit replays kernels it captured once, for fixed shapes. What changes from call to
        # call enters as Variables bound to numbers: the position, the count of new tokens, and
        # the token ids themselves (on a CPU, a Tensor made from a list costs more than a step)
        self.pos_var = UOp.variable("start_pos", 0, cfg.n_positions - 1)
        self.count_var = UOp.variable("new_tokens", 1, CHUNK)
        self.token_vars = [UOp.variable(f"token{i}", 0, cfg.vocab_size - 1) for i in range(CHUNK)]
        self.jit_one, self.jit_many = TinyJit(self.step_one), TinyJit(self.step_many)
        self.out = None  # where step_many writes its logits: (CHUNK, vocab)

    def forward(self, tokens, start_pos=None):
        """Logits (B, T, vocab) of a (B, T) batch; start_pos given: use and fill the KV cache."""
        T = tokens.shape[1]
        pos = Tensor.arange(T) if start_pos is None else Tensor.arange(T) + start_pos
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.h:
            x = block(x, start_pos)
        return self.ln_f(x) @ self.wte.weight.T  # the output head is tied to the input embedding

    def step_one(self, start_pos, token):
        """The decoding step: one token at start_pos; its logits (1, vocab)."""
        x = Tensor(token).cast(dtypes.int32).reshape(1, 1)
        return self.forward(x, start_pos)[0].float().realize()

    def step_many(self, start_pos, count, *tokens):
        """`count` of the CHUNK tokens at start_pos, start_pos + 1, ...; logits into self.out."""
        x = Tensor.stack(*[Tensor(t) for t in tokens]).cast(dtypes.int32).reshape(1, CHUNK)
        self.out[:count].assign(self.forward(x[:, :count], start_pos)[0].float()).realize()

    def __call__(self, tokens, start):
        """specmini's model protocol: the logits of tokens[start:], (len(tokens) - start, vocab)."""
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
        p = 0
        while p < min(start, len(self.cached)) and self.cached[p] == tokens[p]:
            p += 1
        self.computed = len(tokens) - p
        rows = [self.run(tokens[q : q + CHUNK], q) for q in range(p, len(tokens), CHUNK)]
        self.cached = tokens
        return np.concatenate(rows)[start - p :]

    def run(self, chunk, pos):
        """One compiled call over up to CHUNK new tokens at positions pos, pos + 1, ..."""
        sp = self.pos_var.bind(pos)
        if len(chunk) == 1:
            return self.jit_one(sp, self.token_vars[0].bind(chunk[0])).numpy()
        if self.out is None:
            self.out = Tensor.zeros(CHUNK, self.config.vocab_size).contiguous().realize()
        # 2 to CHUNK tokens share one compiled graph: unused token slots are bound to 0
        tokens = [v.bind(t) for v, t in zip(self.token_vars, chunk + [0] * CHUNK, strict=False)]
        self.jit_many(sp, self.count_var.bind(len(chunk)), *tokens)
        return self.out.numpy()[: len(chunk)]

    def reset(self):
        """Forget the cache (its buffers stay allocated and are overwritten)."""
        self.cached = []

    def half(self):
        """fp16 weights (and so fp16 activations and cache): half the memory, faster on GPUs."""
        for t in weights(self).values():
            t.replace(t.half().contiguous().realize())
        return self


# ---------- loading ----------


def weights(model):
    """The learned tensors under the hub's names (the KV caches are not weights)."""
    modules = {"wte": model.wte, "wpe": model.wpe, "h": model.h, "ln_f": model.ln_f}
    return {k: v for k, v in get_state_dict(modules).items() if not k.endswith("cache_kv")}


def hf_state_dict(model, prefix="transformer."):
    """The model's weights under save_pretrained's names (tied head left out, as it does)."""
    return {prefix + k: v for k, v in weights(model).items()}


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
    for k, t in expected.items():
        if t.shape != got[k].shape:
            raise ValueError(f"{source}: {k} has shape {got[k].shape}, expected {t.shape}")
        t.replace(got[k].to(t.device).cast(t.dtype).contiguous())
    if head is not None and not np.array_equal(head.numpy(), got["wte.weight"].numpy()):
        raise ValueError(f"{source}: lm_head.weight differs from wte.weight; GPT-2 ties them")
    Tensor.realize(*expected.values())
    return model


def cache_dir():
    """Where downloads are kept: tinygrad's cache folder (~/.cache/tinygrad/downloads)."""
    from tinygrad.helpers import _ensure_downloads_dir

    return _ensure_downloads_dir()


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
    model = load_state(GPT2(cfg), safe_load(str(weights_path)), weights_path)
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
