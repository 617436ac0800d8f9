"""Train the offline pair: a GPT-2-shaped target and draft on the Python standard library's source.

Byte-level tokens (vocab 256), so no tokenizer file is needed. The models are saved in the
Hugging Face layout (config.json + model.safetensors, keys prefixed `transformer.`) that
notebooks/gpt2.py's `load` reads, with training.json beside them: settings, corpus, losses.

    python scripts/train_pair.py                      # both models, the committed settings
    python scripts/train_pair.py --only pydraft --steps 20 --out /tmp/pair   # a quick try

With the committed settings the target took 48 minutes and the draft 6 on a shared 2-core CPU.
tinygrad trains on whatever device it finds (DEV=CUDA etc.): more --steps there are cheap.
"""

import argparse
import json
import math
import pathlib
import platform
import sys
import sysconfig
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.helpers import Context, getenv
from tinygrad.nn.optim import AdamW
from tinygrad.nn.state import get_parameters

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "notebooks"))
from gpt2 import GPT2, Config, save  # noqa: E402

# What the two models look like and how long each trains (steps of batch * context tokens).
MODELS = {
    "pytarget": dict(n_layer=4, n_embd=128, n_head=4, steps=720, lr=3e-3),
    "pydraft": dict(n_layer=1, n_embd=48, n_head=3, steps=720, lr=5e-3),
}
CONTEXT, BATCH, SEED, VAL_EVERY = 128, 16, 1234, 20  # every 20th file is held out for validation
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}


def corpus_files():
    """The standard library's .py files, in a fixed order, without test suites or site-packages."""
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in stdlib.rglob("*.py") if not SKIP_DIRS & set(p.relative_to(stdlib).parts)]
    return stdlib, sorted(files, key=lambda p: p.relative_to(stdlib).as_posix())


def load_corpus():
    """Train and validation bytes; files joined with a blank line, whole files held out."""
    stdlib, files = corpus_files()
    train, val = [], []
    for i, p in enumerate(files):
        (val if i % VAL_EVERY == 0 else train).append(p.read_bytes() + b"\n\n")
    info = {
        "source": "the .py files of the Python standard library, test suites excluded",
        "python": platform.python_version(),
        "stdlib": str(stdlib),
        "excluded_dirs": sorted(SKIP_DIRS),
        "files": len(files),
        "validation": f"every {VAL_EVERY}th file in sorted path order (whole files held out)",
        "train_bytes": sum(map(len, train)),
        "val_bytes": sum(map(len, val)),
    }
    as_array = lambda parts: np.frombuffer(b"".join(parts), dtype=np.uint8)  # noqa: E731
    return as_array(train), as_array(val), info


def batches(data, rng, n):
    """n random windows of CONTEXT + 1 bytes: inputs and next-byte targets."""
    starts = rng.integers(0, len(data) - CONTEXT - 1, size=n)
    windows = np.stack([data[s : s + CONTEXT + 1] for s in starts]).astype(np.int32)
    return windows[:, :-1], windows[:, 1:]


def loss_of(model, x, y):
    logits = model.forward(Tensor(x, dtype=dtypes.int32))
    return logits.sparse_categorical_crossentropy(Tensor(y, dtype=dtypes.int32))


def evaluate(model, data, seed, n_batches=8):
    """Mean loss (nats per byte) over fixed windows, the same for every model."""
    rng = np.random.default_rng(seed)
    losses = [loss_of(model, *batches(data, rng, BATCH)).item() for _ in range(n_batches)]
    return float(np.mean(losses))


def schedule(i, steps, warmup):
    """Linear warmup to 1, then cosine decay to 0.1."""
    if i < warmup:
        return min(1.0, (i + 1) / warmup)
    return 0.1 + 0.45 * (1 + math.cos(math.pi * (i - warmup) / (steps - warmup)))


def train(name, spec, train_data, val_data, info, out, steps=None):
    Tensor.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    steps = steps or spec["steps"]
    cfg = Config(vocab_size=256, n_positions=CONTEXT, n_embd=spec["n_embd"],
                 n_layer=spec["n_layer"], n_head=spec["n_head"])  # fmt: skip
    model = GPT2(cfg)
    params = get_parameters(model)
    n_params = sum(p.numel() for p in params)
    opt = AdamW(params, lr=spec["lr"], weight_decay=0.01)
    warmup = max(1, steps // 20)

    @TinyJit
    def step(x, y, lr):
        with Context(TRAINING=1):
            opt.lr.assign(lr)
            opt.zero_grad()
            loss = model.forward(x).sparse_categorical_crossentropy(y)
            loss.backward()
            opt.step()
            return loss.realize()

    print(f"{name}: {n_params:,} parameters, {steps} steps of {BATCH}x{CONTEXT} bytes", flush=True)
    history, t0 = [], time.perf_counter()
    for i in range(steps):
        lr = spec["lr"] * schedule(i, steps, warmup)
        x, y = batches(train_data, rng, BATCH)
        x, y = Tensor(x, dtype=dtypes.int32), Tensor(y, dtype=dtypes.int32)
        loss = step(x, y, Tensor([lr], dtype=dtypes.float32)).item()
        history.append(loss)
        if i % 10 == 0 or i == steps - 1:
            dt = time.perf_counter() - t0
            print(f"{name} step {i:4d} loss {loss:.4f} lr {lr:.2e} {dt:7.1f}s", flush=True)
    seconds = time.perf_counter() - t0
    train_loss = evaluate(model, train_data, SEED + 1)
    val_loss = evaluate(model, val_data, SEED + 2)
    print(f"{name}: train loss {train_loss:.4f}, validation {val_loss:.4f} nats/byte", flush=True)
    save(model, out / name)
    record = {
        "model": name,
        "parameters": n_params,
        "config": {k: v for k, v in spec.items() if k not in ("steps", "lr")},
        "context": CONTEXT,
        "training": {
            "steps": steps,
            "batch": BATCH,
            "tokens_per_step": BATCH * CONTEXT,
            "tokens_seen": steps * BATCH * CONTEXT,
            "optimizer": "AdamW, weight_decay 0.01",
            "lr": f"peak {spec['lr']}, linear warmup {warmup} steps, cosine decay to peak/10",
            "seed": SEED,
            "seconds": round(seconds, 1),
            "machine": f"tinygrad {_tinygrad_version()} on {platform.machine()} CPU",
        },
        "corpus": info,
        "tokens": "bytes of UTF-8 text, vocab 256",
        "final_losses_nats_per_byte": {
            "train": round(train_loss, 4),
            "validation": round(val_loss, 4),
            "last_10_steps_mean": round(float(np.mean(history[-10:])), 4),
        },
        "loss_every_10_steps": [round(v, 4) for v in history[::10]],
    }
    (out / name / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def _tinygrad_version():
    from importlib.metadata import version

    return version("tinygrad")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "models")
    parser.add_argument("--only", choices=sorted(MODELS))
    parser.add_argument("--steps", type=int, default=getenv("STEPS", 0) or None)
    args = parser.parse_args()
    train_data, val_data, info = load_corpus()
    print(json.dumps(info), flush=True)
    for name, spec in MODELS.items():
        if args.only in (None, name):
            train(name, spec, train_data, val_data, info, args.out, args.steps)


if __name__ == "__main__":
    main()
