"""Run course/gpt2.py's compiled calls on small random shapes; one line per shape as it ends.

tinygrad 0.14 could recurse without end on some shapes when the token count was symbolic, and
its compile worker then died silently: the process hung. tests/test_gpu_path.py runs this in a
subprocess and fails when a shape makes no progress for minutes; the last line names the shape.
"""

import numpy as np

from course import gpt2

from tinygrad import Tensor

# (n_embd, n_head, n_layer, n_positions). Of the three that hung (with a symbolic token count,
# which the course no longer compiles), the one of two blocks; then an odd one. Each shape's
# kernels compile from nothing, about 25 s on a cold cache: two, not the four there were.
SHAPES = [
    (128, 4, 2, 32),
    (48, 3, 1, 40),  # 40 positions + a chunk of 16: not a whole number of blocks of 16 keys
]

if __name__ == "__main__":
    for n_embd, n_head, n_layer, n_positions in SHAPES:
        print(f"n_embd={n_embd} n_head={n_head} n_layer={n_layer}: ", end="", flush=True)
        cfg = gpt2.Config(
            vocab_size=64, n_positions=n_positions, n_embd=n_embd, n_head=n_head, n_layer=n_layer
        )
        model = gpt2.GPT2(cfg)
        tokens = list(range(1, 20))
        rows = [model(tokens[:3], 0), model(tokens[:4], 3)]  # 3 new tokens (padded to 4), then 1
        assert all(np.isfinite(r).all() for r in rows), "non-finite logits"
        reference = model.forward(Tensor([tokens[:4]])).numpy()[0]  # the whole sequence at once
        np.testing.assert_allclose(np.concatenate(rows), reference, rtol=1e-4, atol=1e-4)
        print("ok", flush=True)
