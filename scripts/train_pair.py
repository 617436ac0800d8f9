"""Train the offline pair: a deep GPT-2-shaped target and a one-block draft distilled from it.

Both learn the Python standard library's source as bytes (vocab 256), so no tokenizer file is
needed. Training runs in PyTorch + transformers (requirements-bench.txt), the fastest trainer on
a small CPU; the result is a Hugging Face checkpoint (config.json + model.safetensors) that the
course loads with its own tinygrad loader, so learners never install PyTorch.

    python scripts/train_pair.py                         # target, then both drafts
    python scripts/train_pair.py --only pydraft-data     # one model
    python scripts/train_pair.py --steps 20 --out /tmp/pair   # a quick try

Three models:
  pytarget          24 blocks x 128, trained on the data (next-byte cross-entropy);
  pydraft           1 block x 128, distilled from pytarget (DistillSpec, Zhou et al. 2023,
                    arXiv:2310.08461): its loss is the cross-entropy against the target's own
                    next-byte distribution, KL(target || draft) up to a constant;
  pydraft-data      the same shape trained on the data alone, kept to show what distillation adds.
The course's pair is pytarget and pydraft. A run saves a checkpoint every --save-every steps
and resumes from it (--resume), so a long run can be split; the checkpoint is not committed.
"""

import argparse
import json
import math
import pathlib
import time

import numpy as np
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from course import corpus
from course.timing import cpu_model

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = {
    "pytarget": dict(n_layer=24, n_embd=128, n_head=4, steps=5000, lr=2e-3, teacher=None),
    "pydraft": dict(n_layer=1, n_embd=128, n_head=4, steps=3000, lr=3e-3, teacher="pytarget"),
    "pydraft-data": dict(n_layer=1, n_embd=128, n_head=4, steps=3000, lr=3e-3, teacher=None),
}
CONTEXT, BATCH, SEED = 256, 8, 1234


def batches(data, rng, n):
    """n random windows of CONTEXT + 1 bytes: inputs and next-byte targets, each (n, CONTEXT)."""
    starts = rng.integers(0, len(data) - CONTEXT - 1, size=n)
    windows = torch.from_numpy(
        np.stack([data[s : s + CONTEXT + 1] for s in starts]).astype(np.int64)
    )
    return windows[:, :-1], windows[:, 1:]


def gpt2(spec):
    cfg = GPT2Config(vocab_size=256, n_positions=CONTEXT, n_embd=spec["n_embd"],
                     n_layer=spec["n_layer"], n_head=spec["n_head"], activation_function="gelu_new",
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
                     bos_token_id=None, eos_token_id=None)  # GPT-2's 50256 is no byte  # fmt: skip
    return GPT2LMHeadModel(cfg)


def next_byte_loss(model, x, y, teacher=None):
    """Cross-entropy (nats per byte) against the data, or against the teacher's distribution."""
    logits = model(x).logits  # (B, T, 256)
    if teacher is None:
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())
    with torch.no_grad():
        target = teacher(x).logits.softmax(-1)
    return -(target * logits.log_softmax(-1)).sum(-1).mean()


@torch.no_grad()
def evaluate(model, data, seed, n_batches=16):
    """Mean next-byte loss on the data over fixed windows, the same for every model."""
    model.eval()
    rng = np.random.default_rng(seed)
    losses = [next_byte_loss(model, *batches(data, rng, BATCH)).item() for _ in range(n_batches)]
    model.train()
    return float(np.mean(losses))


def schedule(i, steps, warmup):
    """Linear warmup to 1, then cosine decay to 0.1."""
    if i < warmup:
        return (i + 1) / warmup
    return 0.1 + 0.45 * (1 + math.cos(math.pi * (i - warmup) / max(1, steps - warmup)))


def train(name, spec, train_data, val_data, info, out, steps=None, resume=False, save_every=250):
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    steps = steps or spec["steps"]
    model = gpt2(spec)
    teacher = None
    if spec["teacher"]:
        teacher = GPT2LMHeadModel.from_pretrained(out / spec["teacher"]).eval()
    opt = torch.optim.AdamW(model.parameters(), lr=spec["lr"], weight_decay=0.01, betas=(0.9, 0.95))
    warmup, start, history, seconds = max(1, steps // 20), 0, [], 0.0
    checkpoint = out / name / "checkpoint.pt"
    if resume and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"]), opt.load_state_dict(state["opt"])
        rng.bit_generator.state = state["rng"]
        start, history, seconds = state["step"], state["history"], state["seconds"]
        print(f"{name}: resumed at step {start}", flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {n_params:,} parameters, {steps} steps of {BATCH}x{CONTEXT} bytes", flush=True)
    t0 = time.perf_counter() - seconds
    for i in range(start, steps):
        for group in opt.param_groups:
            group["lr"] = spec["lr"] * schedule(i, steps, warmup)
        loss = next_byte_loss(model, *batches(train_data, rng, BATCH), teacher)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append(loss.item())
        if i % 20 == 0 or i == steps - 1:
            dt = time.perf_counter() - t0
            print(f"{name} step {i:5d} loss {history[-1]:.4f} {dt:7.1f}s", flush=True)
        if (i + 1) % save_every == 0 and i + 1 < steps:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            state = dict(model=model.state_dict(), opt=opt.state_dict(), step=i + 1)
            state |= dict(rng=rng.bit_generator.state, history=history)
            torch.save(state | dict(seconds=time.perf_counter() - t0), checkpoint)
    seconds = time.perf_counter() - t0
    train_loss, val_loss = (
        evaluate(model, train_data, SEED + 1),
        evaluate(model, val_data, SEED + 2),
    )
    print(f"{name}: train loss {train_loss:.4f}, validation {val_loss:.4f} nats/byte", flush=True)
    model.save_pretrained(out / name)
    (out / name / "generation_config.json").unlink(missing_ok=True)  # the course does not read it
    checkpoint.unlink(missing_ok=True)
    record = {
        "model": name,
        "parameters": n_params,
        "config": {k: spec[k] for k in ("n_layer", "n_embd", "n_head")},
        "context": CONTEXT,
        "training": {
            "objective": (
                f"distilled: cross-entropy against {spec['teacher']}'s next-byte "
                "distribution (DistillSpec, arXiv:2310.08461)"
            )
            if spec["teacher"]
            else "next-byte cross-entropy on the data",  # fmt: skip
            "steps": steps,
            "batch": BATCH,
            "tokens_per_step": BATCH * CONTEXT,
            "tokens_seen": steps * BATCH * CONTEXT,
            "optimizer": "AdamW, betas (0.9, 0.95), weight_decay 0.01, gradient norm clipped at 1",
            "lr": f"peak {spec['lr']}, linear warmup {warmup} steps, cosine decay to peak/10",
            "seed": SEED,
            "seconds": round(seconds, 1),
            "machine": f"PyTorch {torch.__version__} on {cpu_model()}",
            "threads": torch.get_num_threads(),
        },
        "corpus": info,
        "tokens": "bytes of UTF-8 text, vocab 256",
        "final_losses_nats_per_byte": {
            "train": round(train_loss, 4),
            "validation": round(val_loss, 4),
            "last_20_steps_mean": round(float(np.mean(history[-20:])), 4),
        },
        "loss_every_20_steps": [round(v, 4) for v in history[::20]],
    }
    (out / name / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "models")
    parser.add_argument("--only", choices=sorted(MODELS))
    parser.add_argument("--steps", type=int, help="override every model's step count (a quick try)")
    parser.add_argument("--resume", action="store_true", help="go on from a saved checkpoint")
    parser.add_argument("--save-every", type=int, default=250)
    args = parser.parse_args()
    train_data, val_data, info = corpus.load()
    print(json.dumps(info), flush=True)
    for name, spec in MODELS.items():
        if args.only in (None, name):
            train(name, spec, train_data, val_data, info, args.out, args.steps, args.resume,
                  args.save_every)  # fmt: skip


if __name__ == "__main__":
    main()
