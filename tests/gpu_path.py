"""Compile course/gpt2.py's calls as for an H100 and count their kernels, on any machine (no GPU).

Run with DEV='MOCK+NULL:PTX:sm_90' NULL_ALLOW_COPYOUT=1: tinygrad's NULL device with the PTX
renderer for sm_90 schedules and renders every kernel as for that GPU and runs nothing. Prints
JSON: for 1 and 2 blocks and each compiled call (new-token count), the kernels launched and
those whose launch grid is empty with every symbolic variable at 0. tinygrad 0.14's CUDA graph
builds its nodes with the variables at 0, and an empty grid is the invalid argument
(CUDA Error 1) that crashed the course on an H100. Used by tests/test_gpu_path.py.
"""

import json

from course import gpt2


def empty_at_zero(program):
    dims = program.launch_dims({v.expr: 0 for v in program.vars})
    return 0 in sum(map(tuple, dims), ())


def count(n_layer, shape):
    model = gpt2.GPT2(gpt2.Config(n_layer=n_layer, **shape)).half()  # fp16, as on a GPU
    model.compile()  # every count that prompts, decoding and verification use
    calls = {
        n: {"kernels": len(progs), "empty_grid_at_zero": sum(map(empty_at_zero, progs))}
        for n, progs in gpt2.kernel_counts(model).items()
    }
    # on a GPU the head reads the embedding itself (a view), not a packed copy as on a CPU
    head = model.ln_f_head.linear.laid_out.uop.base is model.wte.weight.uop.base
    return {**calls, "head_reads_the_embedding": head}


if __name__ == "__main__":
    from tinygrad import Device

    shape = dict(n_embd=768, n_head=12, vocab_size=256, n_positions=128)  # GPT-2 small's blocks
    one, two = count(1, shape), count(2, shape)
    print(json.dumps({"device": Device.DEFAULT, "shape": shape, "1": one, "2": two}))
