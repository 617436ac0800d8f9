"""Train the offline pair: a GPT-2-shaped target and drafts distilled from it.

Both learn the Python standard library's source as bytes (vocab 256), so no tokenizer file is
needed. Training runs in PyTorch + transformers (requirements-bench.txt), the fastest trainer on
a small CPU; the result is a Hugging Face checkpoint (config.json + model.safetensors) that the
course loads with its own tinygrad loader, so learners never install PyTorch.

    python scripts/train_pair.py                         # every group, in order
    python scripts/train_pair.py --only pytarget         # one group
    python scripts/train_pair.py --steps 20 --out /tmp/pair   # a quick try

The models, trained in groups (a group's models see the same batches):
  pydraft-data      1 block x 128, trained on the data alone (next-byte cross-entropy): the
                    distilled draft's starting point, and the contrast that shows what
                    distillation adds;
  pytarget          6 blocks x 512 (19M parameters, 77 MB in fp32: more than the 32 MB L3 of the
                    course's CPU machine, so a step is a read of the weights), trained on the data
                    and, with equal weight, on the next-byte distribution of the course's earlier
                    24 x 128 target (knowledge distillation, Hinton et al. 2015, arXiv:1503.02531):
                    its soft labels carry more per byte than the data's hard ones, which matters on
                    two CPU cores, where the target sees 4M bytes in two hours. That teacher is
                    models/pytarget at commit 999270b; put it in models/teacher-24x128 first:
                        mkdir -p models/teacher-24x128 && for f in config.json model.safetensors; do
                        git show 999270b:models/pytarget/$f > models/teacher-24x128/$f; done
  pydraft, pydraft-2x256
                    drafts distilled from pytarget (DistillSpec, Zhou et al. 2023,
                    arXiv:2310.08461): the loss is the cross-entropy against the target's own
                    next-byte distribution, KL(target || draft) up to a constant. Two shapes share
                    each batch and the target's forward pass (the distillation's largest cost);
                    the course keeps the one with the better measured speed-up.
Weights are stored in float16 (half the clone) and read into float32 by the course; every loss
in training.json is measured on the stored, rounded weights, and a teacher is its stored self.
A run saves a checkpoint every --save-every steps and resumes from it (--resume), so a long run
can be split; the checkpoint is not committed.
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
SMALL = dict(n_layer=1, n_embd=128, n_head=4)
MODELS = {
    "pydraft-data": dict(SMALL, lr=3e-3, init=None),
    "pytarget": dict(n_layer=6, n_embd=512, n_head=8, lr=1e-3, init=None),
    "pydraft": dict(SMALL, lr=2e-3, init="pydraft-data"),
    "pydraft-2x256": dict(n_layer=2, n_embd=256, n_head=4, lr=3e-3, init=None),
}
# (models, teacher, steps, weight of the data in the loss). On two CPU cores (this project's AMD
# EPYC) the target takes about 3.4 s a step with its teacher: its 1900 steps took 107 minutes and
# reached 1.177 nats/byte held out (its 24 x 128 teacher: 1.043 after 5000 steps); the drafts'
# group took 12 minutes. A first run (lr 2e-3, data alone) was at 2.04 after 1100 steps.
GROUPS = (
    (("pydraft-data",), None, 3000, 1.0),
    (("pytarget",), "teacher-24x128", 1900, 0.5),
    (("pydraft", "pydraft-2x256"), "pytarget", 500, 0.0),
)
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


def stored(directory):
    """A trained model as the course reads it: float16 on disk, float32 in memory."""
    return GPT2LMHeadModel.from_pretrained(directory, dtype=torch.float32)


def next_byte_loss(model, x, y, soft=None, data_weight=1.0):
    """Cross-entropy (nats per byte) against the data, a teacher's distribution, or a mix."""
    logits = model(x).logits  # (B, T, 256)
    hard = F.cross_entropy(logits.flatten(0, 1), y.flatten()) if data_weight else 0.0
    if soft is None:
        return hard
    return data_weight * hard - (1 - data_weight) * (soft * logits.log_softmax(-1)).sum(-1).mean()


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


def train(names, teacher_name, steps, data_weight, train_data, val_data, info, out, resume=False,
          save_every=250):  # fmt: skip
    """Train a group of models on the same batches; a teacher's forward pass serves them all."""
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    models = {n: stored(out / MODELS[n]["init"]) if MODELS[n]["init"] else gpt2(MODELS[n])
              for n in names}  # fmt: skip
    teacher = stored(out / teacher_name).eval() if teacher_name else None
    opts = {n: torch.optim.AdamW(m.parameters(), lr=MODELS[n]["lr"], weight_decay=0.01,
                                 betas=(0.9, 0.95)) for n, m in models.items()}  # fmt: skip
    warmup, start, seconds = max(1, steps // 20), 0, 0.0
    history = {n: [] for n in names}
    checkpoint = out / f"checkpoint-{'+'.join(names)}.pt"
    if resume and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        for n in names:
            models[n].load_state_dict(state["models"][n]), opts[n].load_state_dict(state["opts"][n])
        rng.bit_generator.state = state["rng"]
        start, history, seconds = state["step"], state["history"], state["seconds"]
        print(f"{'+'.join(names)}: resumed at step {start}", flush=True)
    for n, m in models.items():
        n_params = sum(p.numel() for p in m.parameters())
        print(f"{n}: {n_params:,} parameters, {steps} steps of {BATCH}x{CONTEXT} bytes", flush=True)
    t0 = time.perf_counter() - seconds
    for i in range(start, steps):
        x, y = batches(train_data, rng, BATCH)
        soft = None
        if teacher is not None:
            with torch.no_grad():
                soft = teacher(x).logits.softmax(-1)
        for n, m in models.items():
            for group in opts[n].param_groups:
                group["lr"] = MODELS[n]["lr"] * schedule(i, steps, warmup)
            loss = next_byte_loss(m, x, y, soft, data_weight)
            opts[n].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opts[n].step()
            history[n].append(loss.item())
        if i % 20 == 0 or i == steps - 1:
            dt = time.perf_counter() - t0
            losses = " ".join(f"{n} {h[-1]:.4f}" for n, h in history.items())
            print(f"step {i:5d} {losses} {dt:7.1f}s", flush=True)
        if (i + 1) % save_every == 0 and i + 1 < steps:
            state = dict(models={n: m.state_dict() for n, m in models.items()}, step=i + 1)
            state |= dict(opts={n: o.state_dict() for n, o in opts.items()})
            state |= dict(rng=rng.bit_generator.state, history=history)
            torch.save(state | dict(seconds=time.perf_counter() - t0), checkpoint)
    seconds = time.perf_counter() - t0
    for n, m in models.items():
        save(n, m, teacher_name, data_weight, steps, warmup, seconds, history[n], train_data,
             val_data, info, out)  # fmt: skip
    checkpoint.unlink(missing_ok=True)


def save(name, model, teacher, data_weight, steps, warmup, seconds, history, train_data, val_data,
         info, out):  # fmt: skip
    """Store the model in float16 and its record, every loss measured on the stored weights."""
    spec = MODELS[name]
    model.to(torch.float16).save_pretrained(out / name)
    (out / name / "generation_config.json").unlink(missing_ok=True)  # the course does not read it
    model = stored(out / name)
    train_loss, val_loss = (
        evaluate(model, train_data, SEED + 1),
        evaluate(model, val_data, SEED + 2),
    )
    print(f"{name}: train loss {train_loss:.4f}, validation {val_loss:.4f} nats/byte", flush=True)
    objective = "next-byte cross-entropy on the data"
    if teacher and not data_weight:
        objective = (f"distilled: cross-entropy against {teacher}'s next-byte distribution "
                     "(DistillSpec, arXiv:2310.08461)")  # fmt: skip
    elif teacher:
        objective = (f"{data_weight} x next-byte cross-entropy on the data + {1 - data_weight} x "
                     f"cross-entropy against {teacher}'s next-byte distribution (knowledge "
                     "distillation, arXiv:1503.02531)")  # fmt: skip
    record = {
        "model": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "config": {k: spec[k] for k in ("n_layer", "n_embd", "n_head")},
        "context": CONTEXT,
        "stored_as": "float16 (the course reads it into float32)",
        "training": {
            "objective": objective,
            "initialised_from": spec["init"] or "random (GPT-2's initialisation)",
            "steps": steps,
            "batch": BATCH,
            "tokens_per_step": BATCH * CONTEXT,
            "tokens_seen": steps * BATCH * CONTEXT,
            "optimizer": "AdamW, betas (0.9, 0.95), weight_decay 0.01, gradient norm clipped at 1",
            "lr": f"peak {spec['lr']}, linear warmup {warmup} steps, cosine decay to peak/10",
            "seed": SEED,
            "seconds": round(seconds, 1),
            "seconds_note": "wall time of the group's whole run (its models train on one batch)",
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "models")
    parser.add_argument("--only", choices=sorted(MODELS), help="the group holding this model")
    parser.add_argument("--steps", type=int, help="override every model's step count (a quick try)")
    parser.add_argument("--resume", action="store_true", help="go on from a saved checkpoint")
    parser.add_argument("--save-every", type=int, default=250)
    args = parser.parse_args()
    train_data, val_data, info = corpus.load()
    print(json.dumps(info), flush=True)
    for names, teacher, steps, data_weight in GROUPS:
        if args.only in (None, *names):
            train(names, teacher, args.steps or steps, data_weight, train_data, val_data, info,
                  args.out, args.resume, args.save_every)  # fmt: skip


if __name__ == "__main__":
    main()
