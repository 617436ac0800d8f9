"""Which tinygrad runtime runs the course's GPT-2 on a CPU, and how a compiled call is run.

**Two CPU runtimes.** tinygrad 0.14 can run a compiled call (`TinyJit`) on a CPU in two ways:

- the default runtime launches the call's kernels one after the other from Python, tens of
  microseconds each: a deep model's step of hundreds of small kernels spends a large share of
  its time on launches (benchmarks/README.md has the measurements);
- HCQ2, switched on by `HCQ2=1` in the environment *before tinygrad is imported*, encodes the
  call's kernels once into a command buffer that worker threads run without Python in between.

Both compute the same logits with the same kernels (the tests check it). The course uses HCQ2 on
a CPU, the faster: `start()`, which course.gpt2 calls before it imports tinygrad, sets `HCQ2=1`
when tinygrad will run on the CPU. `HCQ2=0` in the environment is the way back to the default
runtime. Never on a GPU: HCQ2 is also read by tinygrad's GPU backends (its AMD backend then
imports a module that the pip package does not ship), so it is set only where no GPU can be
picked: `DEV=CPU`, or Linux with no GPU device file.
"""

import glob
import os
import platform
import sys

from course.speed.kernel_rule import compiling

GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dri/renderD*")
# What this file reads of tinygrad beyond its public API (tests/test_runtime.py checks each)
INTERNALS = (
    "tinygrad.engine.realize: getenv('HCQ2') read once, at import (start)",
    "TinyJit.cnt, TinyJit.captured (capture_at_once, run, kernels)",
    "CapturedJit.linear, .ret, .expected_input_info; HCQInfo.device, .input_idxs (Replay.of)",
    "realize.resolve_params, realize.get_runtime, realize.exec_hcq's steps (Replay)",
    "ProgramInfo.vars, .global_size, .local_size, .launch_dims, .runtimevars (Replay)",
    "HCQ2Compiled.signal, .workers, .rt_buffer, .rt_allocator, .prof_ents, .synchronize (Replay)",
    "Tensor._buffer().as_memoryview (read_out, Replay)",
    "tinygrad.helpers._ensure_downloads_dir (downloads_dir)",
)


def cpu_only():
    """True where tinygrad cannot pick anything but its CPU backend (or was told to use it)."""
    dev = os.environ.get("DEV", "")
    if dev:
        return dev.upper().startswith("CPU")
    gpus = ("CUDA", "NV", "AMD", "METAL", "CL", "QCOM", "WEBGPU")
    if any(os.environ.get(name, "") not in ("", "0") for name in gpus):  # legacy CUDA=1 and such
        return False
    no_gpu_files = not any(glob.glob(pattern) for pattern in GPU_DEVICE_FILES)
    return platform.system() == "Linux" and no_gpu_files


def on_cpu(device):
    """Whether a tensor's device (a name such as "CPU" or "CPU:1") is the CPU."""
    return str(device).split(":")[0] == "CPU"


def start():
    """Import tinygrad on the runtime the course runs it with: HCQ2 where only a CPU can run it,
    unless the environment says (HCQ2=0: the default runtime). Called by course.gpt2 before it
    imports tinygrad; once is enough, later calls do nothing. tinygrad reads HCQ2 once, when it
    is imported, so this imports it with HCQ2=1 set, then takes the setting back out of the
    environment: a process this one starts (a notebook's kernel, a test's subprocess) decides
    for itself. If tinygrad was imported earlier, on the default runtime, the course cannot
    switch it: a RuntimeError says so."""
    if "HCQ2" in os.environ or not cpu_only():
        return
    if "tinygrad" in sys.modules:
        if name() != "HCQ2":
            raise RuntimeError(
                "tinygrad was imported before the course's GPT-2, on its slower default CPU "
                "runtime, which tinygrad cannot change once imported: import course.gpt2 (or "
                "course.checkpoints) before tinygrad, for example by restarting the notebook's "
                "kernel and running its cells in order; or set HCQ2=0 before starting Python to "
                "keep tinygrad's default runtime"
            )
        return
    os.environ["HCQ2"] = "1"
    try:
        import tinygrad  # noqa: F401  (reads HCQ2 now, once)
        from tinygrad.helpers import getenv

        getenv("HCQ2")  # cached from here on, whatever the environment says later
    finally:
        del os.environ["HCQ2"]


def name():
    """The runtime tinygrad runs with in this process: "HCQ2" or "default"."""
    from tinygrad.helpers import getenv  # cached when tinygrad was imported, as tinygrad reads it

    return "HCQ2" if getenv("HCQ2") else "default"


# ---------- the internals the course reads ----------


def capture_at_once(jit):
    """Make a TinyJit capture its kernels on its first call instead of its second: its first call
    would only run the computation uncaptured, seconds for a deep model on a CPU. The buffers the
    computation writes must exist already (an uncaptured first call is how TinyJit makes them)."""
    jit.cnt = 1  # TinyJit counts calls; it captures at cnt == 1
    return jit


class CompiledCalls:
    """A model's compiled calls: `decode(tokens (1, T), start_pos, key_blocks)` as one TinyJit per
    count of new tokens T in `buckets`, each built at its first use (a symbolic count would give
    every kernel a launch grid empty at 0, which CUDA graphs refuse). A call over fewer tokens is
    padded with id 0 up to the next count: its rows are dropped, its cache entries overwritten.
    Every input is a Variable: the first position, the blocks of keys it reads, the token ids."""

    def __init__(self, decode, buckets, allowed, cfg, beam=0):
        from course.speed.layouts import n_key_blocks

        from tinygrad import UOp

        if not set(buckets) <= set(allowed) or 1 not in buckets:
            raise ValueError(f"buckets must include 1 and be among {allowed}, got {buckets}")
        self.decode, self.buckets, self.beam = decode, tuple(sorted(buckets)), beam
        self.compiled = {}  # count of new tokens -> TinyJit
        most = max(allowed)
        position = UOp.variable("start_pos", 0, cfg.n_positions - 1)
        key_blocks = UOp.variable("key_blocks", 1, n_key_blocks(cfg.n_positions + most))
        tokens = [UOp.variable(f"token{i}", 0, cfg.vocab_size - 1) for i in range(most)]
        self.variables = [position, key_blocks, *tokens]  # a compiled call's arguments, in order

    def __call__(self, chunk, pos):
        """The logits (bucket, padded vocab) of the new tokens `chunk` at pos, pos + 1, ..."""
        from course.speed.layouts import n_key_blocks

        size = next(b for b in self.buckets if b >= len(chunk))
        if size not in self.compiled:  # captured at its first call: the caches must exist
            self.compiled[size] = capture_at_once(self.compiled_decode(size))
        padded = chunk + [0] * (size - len(chunk))
        values = [pos, n_key_blocks(pos + size), *padded]  # the keys up to the last new position
        return run(self.compiled[size], dict(zip(self.variables, values, strict=False)), self.beam)

    def compiled_decode(self, size):
        """`decode` over `size` new tokens as a TinyJit, its inputs Variables only."""
        from tinygrad import Tensor, TinyJit, dtypes

        def call(start_pos, key_blocks, *tokens):  # self.variables' order
            ids = Tensor.stack(*[Tensor(t) for t in tokens]).cast(dtypes.int32).reshape(1, size)
            return self.decode(ids, start_pos, key_blocks)

        return TinyJit(call)


def run(jit, values, beam=0):
    """Run a compiled call (a TinyJit) whose inputs are Variables, given as {Variable: value};
    return a copy of the values it computes. Once captured on HCQ2 it is replayed (`Replay`);
    otherwise TinyJit runs it, each Variable bound to its value, in `compiling(beam)` (its first
    call compiles its kernels; a replay compiles nothing and skips the context's cost)."""
    replay = getattr(jit, "course_replay", None)
    if replay is None and jit.captured is not None and name() == "HCQ2":
        replay = jit.course_replay = Replay.of(jit)  # False where it cannot replay this call
    if replay:
        return replay({var.expr: value for var, value in values.items()})
    with compiling(beam):
        return read_out(jit(*[var.bind(value) for var, value in values.items()]))


class Replay:
    """A captured call replayed on HCQ2 with none of TinyJit's bookkeeping per call.

    On HCQ2 a captured call is one program that submits the call's command buffer (every
    kernel, encoded once) to the worker thread that runs them. Each call, TinyJit looks up the
    buffers of all the call's kernels (hundreds for the target) before it runs that program,
    and binding the Variables and reading the output tensor cost as much again: a large share
    of a small model's call on a CPU. Replay looks the buffers up once, runs the
    program as tinygrad's `exec_hcq` does with only the Variables' values new (without its
    profiling), waits, and copies the output from a view kept of its buffer. A call with input
    tensors (the course's take none), in more than one submit or not on a CPU is left to
    TinyJit. A TinyJit captured anew would need a new Replay: GPT2 makes new TinyJits instead."""

    SPINS = 1_000_000  # turns `wait` spins before it leaves the wait to tinygrad

    def __init__(self, jit):
        import numpy as np

        from tinygrad import Device
        from tinygrad.engine.realize import get_runtime, resolve_params
        from tinygrad.helpers import GlobalCounters

        (call,) = jit.captured.linear.src
        self.program, device = call.src[0].src[0], call.arg.aux.device[0]
        self.device, out = Device[device], jit.captured.ret
        found = resolve_params(call, ())
        args = [found[i].buffer.ensure_allocated() for i in self.program.arg.globals]
        self.args = [b.get_buf(device) for b in args]
        self.runtime = get_runtime(device, self.program)
        self.counters = GlobalCounters
        self.launches = len(call.arg.aux.kernels)  # counted as tinygrad counts them
        view = out._buffer().as_memoryview(allow_zero_copy=True)  # the buffer every replay fills
        self.out = np.frombuffer(view, dtype=out.dtype.fmt).reshape(out.shape)
        # the program's values in its order, and its launch size where no value changes it, found
        # once: tinygrad's `vals` rebuilds a dict per value, a visible cost in a short call
        arg = self.program.arg
        self.names = [None if v.expr in arg.runtimevars else v.expr for v in arg.vars]
        sizes = (*arg.global_size, *(arg.local_size or ()))
        self.launch = arg.launch_dims({}) if all(isinstance(n, int) for n in sizes) else None
        # what `wait` compares, (goal, reached, lag): each worker's commands submitted and run,
        # the timeline's last value and the signal that reaches it
        timeline = self.device.signal("value", 1, device="CPU"), self.device.signal("timeline")
        pairs = [(w.put, w.done, 0) for w in self.device.workers] + [(*timeline, 1)]
        view = lambda b: b._buf.cpu_view().view(fmt="Q").mv  # noqa: E731 (a memoryview)
        self.signals = [(view(goal), view(reached), lag) for goal, reached, lag in pairs]

    @classmethod
    def of(cls, jit):
        """A Replay of this captured call, or False where it is not one submit without inputs."""
        from tinygrad import Tensor
        from tinygrad.uop.ops import Ops

        calls, captured = jit.captured.linear.src, jit.captured
        submit = len(calls) == 1 and calls[0].src[0].op is Ops.CUSTOM_FUNCTION
        if not (submit and calls[0].src[0].arg == "hcq"):
            return False
        info = calls[0].arg.aux
        alone = not captured.expected_input_info and not info.input_idxs
        # on a CPU only: the output is read through a view of host memory (a GPU's is a copy)
        cpu = len(info.device) == 1 and on_cpu(info.device[0])
        return cls(jit) if alone and cpu and isinstance(captured.ret, Tensor) else False

    def __call__(self, var_vals):
        rt = self.device.rt_buffer()._buf.va_addr + self.device.rt_allocator.alloc(0)
        var_vals = {**var_vals, "hcq_inputs_ptr": rt}  # as exec_hcq: no inputs, an empty table
        grid, local = self.launch or self.program.arg.launch_dims(var_vals)
        try:
            vals = tuple(None if name is None else var_vals[name] for name in self.names)
        except KeyError as e:  # tinygrad's own message
            raise RuntimeError(f"unbound Variable {e} used by {self.program.arg.name}") from None
        self.runtime(*self.args, global_size=grid, local_size=local, vals=vals)
        self.counters.kernel_count += self.launches
        self.wait()
        return self.out.copy()

    def wait(self):
        """Wait as the device's `synchronize` does (each worker thread has run every command
        submitted to it, and the timeline signal has its last value), on views of those
        counters made once: `synchronize` makes them anew each call, a visible share of a short
        call even when nothing is left to wait for. `synchronize` itself past SPINS turns (it
        raises on a hung worker), with a
        worker new since, while profiling, or on a device other than the one that submits
        (tinygrad's HCQ_RUNTIME_DEV, whose own wait `synchronize` runs first)."""
        from tinygrad.runtime.support.hcq2 import HCQ_RUNTIME_DEV

        fresh = len(self.device.workers) == len(self.signals) - 1 and not self.device.prof_ents
        fresh = fresh and self.device.device == HCQ_RUNTIME_DEV.value
        for _ in range(self.SPINS if fresh else 0):
            if all(reached[0] >= goal[0] - lag for goal, reached, lag in self.signals):
                return
        self.device.synchronize()


def read_out(t):
    """A realized tensor's values, copied out of its buffer (the next replay overwrites it). On a
    CPU in place: `Tensor.numpy()` schedules a copy on every call, a large share of a short call."""
    import numpy as np

    view = t._buffer().as_memoryview(allow_zero_copy=True)  # a copy on a GPU anyway
    return np.frombuffer(view, dtype=t.dtype.fmt).reshape(t.shape).copy()


def downloads_dir():
    """tinygrad's folder for downloaded files (~/.cache/tinygrad/downloads), made if missing."""
    from tinygrad.helpers import _ensure_downloads_dir

    return _ensure_downloads_dir()


def kernels(jit):
    """The kernels a captured TinyJit launches per call, in order, each with a `.name` (empty
    before it is captured). The default runtime keeps each as a program (with its launch
    dimensions), alone or in a GPU graph; HCQ2 keeps a record of each in its command buffer."""
    from tinygrad.uop.ops import Ops

    def programs(linear):
        for call in linear.src:
            fn = call.src[0]
            if fn.op is Ops.CUSTOM_FUNCTION and fn.arg == "graph":
                yield from programs(fn.src[0])
            elif fn.op is Ops.CUSTOM_FUNCTION and fn.arg == "hcq":
                yield from (kernel.arg for _, kernel, _ in call.arg.aux.kernels)
            elif fn.op is Ops.PROGRAM:
                yield fn.arg

    return [] if jit.captured is None else list(programs(jit.captured.linear))
