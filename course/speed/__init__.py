"""The course's speed machinery: what makes course.gpt2's decoding fast on tinygrad 0.14, apart
from the model. Importing it changes nothing; course.gpt2 calls `runtime.start()` once, before it
imports tinygrad, and `runtime.run` builds its compiled calls inside `kernel_rule.compiling()`.

- runtime.py: which CPU runtime tinygrad runs (HCQ2 or its default), and how a compiled call is
  run and replayed;
- kernel_rule.py: the course's rule for CPU kernels with a sum, applied only while a call compiles;
- layouts.py: the weights and the KV cache as the device reads them.

Each file lists the tinygrad internals it reads (`INTERNALS`); tests/test_runtime.py checks them
against the version requirements.txt pins (TINYGRAD_VERSION), so that an upgrade fails loudly.
"""

TINYGRAD_VERSION = "0.14.0"  # the version these internals were read from
