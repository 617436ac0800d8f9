"""Which tinygrad runtime the course runs on, and every tinygrad internal it reads, in one place.

Checked against tinygrad 0.14.0, the version requirements.txt pins; `tests/test_runtime.py` fails
loudly if an upgrade moves any of them. Nothing else in the course reads tinygrad's private names.

**Two CPU runtimes.** tinygrad 0.14 can run a compiled call (`TinyJit`) on a CPU in two ways:

- the default runtime launches the call's kernels one after the other from Python, tens of
  microseconds each: a deep model's step of hundreds of small kernels spends a large share of
  its time on launches (benchmarks/README.md has the measurements);
- HCQ2, switched on by `HCQ2=1` in the environment *before tinygrad is imported*, encodes the
  call's kernels once into a command buffer that worker threads run without Python in between.

Both compute the same logits with the same kernels (the tests check it). The course uses HCQ2 on
a CPU, the faster: importing `course` before tinygrad sets `HCQ2=1` when tinygrad will run on the
CPU. `HCQ2=0` in the environment is the way back to the default runtime. Never on a GPU: HCQ2 is
also read by tinygrad's GPU backends (its AMD backend then imports a module that the pip package
does not ship), so it is set only where no GPU can be picked: `DEV=CPU`, or Linux with no GPU
device file.
"""

import glob
import os
import platform
import sys
import warnings

TINYGRAD_VERSION = "0.14.0"  # the version these internals were read from
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dri/renderD*")


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


def choose():
    """Run tinygrad on HCQ2 where it can only use the CPU, unless the environment says (HCQ2=0:
    the default runtime). tinygrad reads HCQ2 once, when it is imported, so this imports it
    with HCQ2=1 set, then takes the setting back out of the environment: a process this one
    starts (a notebook's kernel, a test's subprocess) decides for itself. Called when `course`
    is imported; too late once tinygrad is."""
    if "HCQ2" in os.environ or not cpu_only():
        return
    if "tinygrad" in sys.modules:
        warnings.warn(
            "tinygrad was imported before course, so the course cannot switch it to its faster "
            "CPU runtime (HCQ2): import course first, or set HCQ2=1 before starting Python",
            stacklevel=3,
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


def on_cpu(device):
    """Whether a tensor's device (a name such as "CPU" or "CPU:1") is the CPU."""
    return str(device).split(":")[0] == "CPU"


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


# ---------- the course's kernel rule ----------

ACCUMULATORS = 16  # independent sums a matmul kernel keeps in flight (AVX2: 16 vector registers)
WIDEST_LOAD = 16  # 32-bit values a CPU kernel may load as one vector: AVX-512 1 register, AVX2 2
VECTOR = WIDEST_LOAD  # outputs a CPU kernel updates per weight load: one vector of weights
# tinygrad 0.14's line that caps a vector load at 4 values (memory_coalescing; install_wide_loads)
TINYGRAD_LOADS = (
    'lengths = [8,4,2] if buf.dtype == dtypes.half and getenv("ALLOW_HALF8") else [4,2]'
)


def rows_in_registers(k):
    """The course's rule for a CPU kernel with a sum (a matmul): keep its few rows in registers
    (upcast them), so that each weight is read once for all of them. Returns the kernel and
    whether it is finished (tinygrad's heuristics must not touch it further).

    The rows are the small axis that the kernel's largest summed-over input (the weights, or the
    cached keys and values) does not depend on. Where those weights lie side by side along an
    output (stored (in, out)), the kernel loads VECTOR neighbouring outputs' weights as vectors
    and updates VECTOR sums per row from each load (all rows at once up to 9; 12 or 16 rows, as
    in a prompt's chunk, 4 at a time); it is then finished: no unrolled sum (its
    chains of scalar additions do not vectorise) and threads only as tinygrad gives them, for
    large kernels. Otherwise (weights summed along their contiguous axis, as the output head
    and q @ k.T read theirs) a few outputs are upcast too, so that about ACCUMULATORS sums are
    in flight, and tinygrad's heuristics do the rest; with no such rows (a single row, or no
    summed-over input), a small axis that some buffer does not depend on is upcast instead.

    tinygrad's heuristics compute a kernel over 2 to 9 new tokens one row after the other and so
    read every weight once per row: a pass over several tokens then costs several steps. Its
    kernel search (BEAM) finds kernels like these, but takes many minutes in every fresh cache
    (benchmarks/README.md, History)."""
    from tinygrad.codegen.opt import Opt, OptOps

    def sizes():
        return [(a, k.full_shape[a]) for a in k.upcastable_dims if isinstance(k.full_shape[a], int)]

    weights = largest_read(k)
    axes = reads(k)[weights] if weights is not None else set()
    rows = next(((a, n) for a, n in sizes() if 2 <= n <= 16 and a not in axes), None)

    def outputs_side_by_side():  # an output axis along which the weights have stride 1
        beside = unit_stride(k, weights)
        return next((a for a, n in sizes() if a in beside and n % VECTOR == 0), None)

    if weights is not None and outputs_side_by_side() is not None:
        if rows is not None:  # up to 9 rows at once, a vector of sums each (AVX2 spills past 7)
            whole = rows[1] <= 9 or rows[1] % 4
            k.apply_opt(Opt(OptOps.UPCAST, rows[0], 0 if whole else 4))  # 12 or 16: 4 at a time
        k.apply_opt(Opt(OptOps.UPCAST, outputs_side_by_side(), VECTOR))  # axes renumbered
        threads(k)
        return k, True
    if weights is None or rows is None:  # one row, or no summed-over input
        broadcast = set().union(*[set(range(len(k.rngs))) - a for a in reads(k)])
        rows = next(((a, n) for a, n in sizes() if 2 <= n <= 16 and a in broadcast), None)
    if rows is not None:
        k.apply_opt(Opt(OptOps.UPCAST, rows[0], 0))  # 0: the whole axis
    weights = largest_read(k)  # the upcast axis moved: the axes are numbered anew
    axes = reads(k)[weights] if weights is not None else set()
    in_flight = rows[1] if rows else 1
    outputs = next(((a, n) for a, n in reversed(sizes()) if n > 16 and a in axes), None)
    amount = next((m for m in (8, 4, 2) if in_flight * m <= ACCUMULATORS), None)
    if outputs is not None and amount is not None and outputs[1] % amount == 0:
        k.apply_opt(Opt(OptOps.UPCAST, outputs[0], amount))
    return k, False


def lay_out(weight):
    """A linear layer's weights (in, out) as the decoding path reads them. On a CPU, packed
    (out / VECTOR, in, VECTOR): each group of VECTOR outputs has its weights in one contiguous
    run, which a kernel then reads from start to end (`matmul`), where (in, out) has it read
    VECTOR x 4 bytes from every row. The logits are identical and a step is much faster
    (benchmarks/README.md), probably because the CPU's prefetcher does best on one long run of
    consecutive addresses.
    The copy doubles the memory of the linear layers and the head on a CPU (1.4 GB more for
    gpt2-medium in fp32). Elsewhere (a GPU's threads read neighbouring outputs together) the
    weights as they are."""
    n_in, n_out = weight.shape
    if not on_cpu(weight.device) or n_out % VECTOR:
        return weight
    return weight.reshape(n_in, n_out // VECTOR, VECTOR).permute(1, 0, 2).contiguous()


def matmul(x, weight, dtype=None):
    """x @ weight, the weights as `lay_out` returns them: (in, out) or (groups, in, VECTOR)."""
    if weight.ndim == 2:
        return x.matmul(weight, dtype=dtype)
    groups, n_in, width = weight.shape
    y = (x.reshape(*x.shape[:-1], 1, n_in, 1) * weight).sum(-2, dtype=dtype)  # (..., groups, width)
    return y.reshape(*x.shape[:-1], groups * width)


def threads(k):
    """Split a kernel into parts as tinygrad's heuristics split it over CPU threads: only a
    kernel of at least 128K multiply-adds per part, over an axis the count divides. (tinygrad 0.14
    runs the parts of a CPU kernel one after the other, on one thread: `CPUProgram.__call__`,
    and HCQ2's `cpu_exec` queues them on one worker.)"""
    from tinygrad.codegen.opt import KernelOptError, Opt, OptOps
    from tinygrad.uop.ops import AxisType

    if not (k.ren.has_threads and k.ren.global_max is not None):
        return
    work = elements(k, range(len(k.full_shape)))
    for n in [t for t in (32, 16, 12, 8, 6, 5, 4, 3, 2) if t <= k.ren.global_max[0]]:
        if work // (128 << 10) < n:
            continue
        axis = next((a for a in k.axes_of(AxisType.WEAK) if k.full_shape[a] % n == 0), None)
        if axis is not None:
            try:
                k.apply_opt(Opt(OptOps.THREAD, axis, n))
                return
            except KernelOptError:
                pass


def reads(k):
    """For each buffer a kernel reads or writes, the axes its index depends on."""
    return [
        {a for a, rng in enumerate(k.rngs) if rng in b.src[1].get_idx().backward_slice}
        for b in k.bufs
    ]


def unit_stride(k, i):
    """The axes of stride 1 in buffer i: those whose range is a bare term (coefficient 1) of
    its index, so that neighbouring positions along them are neighbours in memory."""
    from tinygrad.uop.ops import Ops

    terms = list(k.bufs[i].src[1].get_idx().split_uop(Ops.ADD))  # a generator: read once
    return {a for a, rng in enumerate(k.rngs) if any(t is rng for t in terms)}


def largest_read(k):
    """The index in k.bufs of the largest input summed over (a matmul's weights), or None: the
    rows are the axes it does not depend on."""
    from tinygrad.uop.ops import AxisType

    summed = set(k.axes_of(AxisType.REDUCE, AxisType.GROUP_REDUCE))
    candidates = [(elements(k, a), i) for i, a in enumerate(reads(k)) if a & summed]
    return max(candidates)[1] if candidates else None


def elements(k, axes):
    """How many points a kernel's axes span, a symbolic size (a position) taken at its largest."""
    n = 1
    for a in axes:
        size = k.full_shape[a]
        n *= size if isinstance(size, int) else size.vmax
    return n


def install_kernel_rule():
    """Put `rows_in_registers` in front of tinygrad's heuristics for CPU kernels with a sum, and
    let CPU kernels load wide vectors (`install_wide_loads`). Kernels compile in this process
    while `compiling()` holds: tinygrad's worker processes would use its heuristics alone."""
    from tinygrad.codegen.opt import KernelOptError, heuristic

    install_wide_loads()
    hand_coded = heuristic.hand_coded_optimizations
    if getattr(hand_coded, "course_rule", False):
        return

    def with_course_rule(k):
        if k.ren.target.device == "CPU" and k.reduceop is None and transcendental(k):
            return k  # a plain loop, which clang vectorises (an upcast one, 7x slower: GELU)
        if k.ren.target.device == "CPU" and k.reduceop is not None:
            try:
                ruled, finished = rows_in_registers(k.copy())
                if finished:
                    return ruled
                k = ruled
            except KernelOptError:  # a shape the rule does not fit: tinygrad's alone
                pass
        return hand_coded(k)

    with_course_rule.course_rule = True
    heuristic.hand_coded_optimizations = with_course_rule


def install_wide_loads():
    """Let a CPU kernel load up to WIDEST_LOAD neighbouring values as one vector, not 4.

    tinygrad 0.14 groups a kernel's loads and stores into vectors of at most 4 values (its pass
    `memory_coalescing`), so clang computes a matmul's sums 4 at a time even where the CPU has
    8 (AVX2) or 16 (AVX-512) lanes: a pass over several tokens uses only part of each vector.
    Wider loads keep the logits identical. tinygrad has no
    setting for it: its module is executed anew from its own source with that one line
    (TINYGRAD_LOADS) changed, for CPU kernels only (any 32-bit or 16-bit buffer, loads and
    stores), and only its `memory_coalescing` is used; elsewhere as it was."""
    import inspect

    import tinygrad.codegen as codegen
    from tinygrad.codegen.late import coalesce

    if getattr(codegen.memory_coalescing, "course_rule", False):
        return
    source = inspect.getsource(coalesce)
    if TINYGRAD_LOADS not in source:
        raise RuntimeError("tinygrad's memory_coalescing changed: check install_wide_loads")
    wide = [WIDEST_LOAD >> i for i in range(WIDEST_LOAD.bit_length() - 1)]  # 16, 8, 4, 2
    elsewhere = TINYGRAD_LOADS.removeprefix("lengths = ")
    cpu_line = f'lengths = {wide} if ctx.target.device == "CPU" else {elsewhere}'
    namespace = {"__name__": coalesce.__name__}  # a copy of the module; tinygrad's stays as it is
    exec(compile(source.replace(TINYGRAD_LOADS, cpu_line), coalesce.__file__, "exec"), namespace)
    namespace["memory_coalescing"].course_rule = True
    codegen.memory_coalescing = namespace["memory_coalescing"]  # the name the pipeline calls


def transcendental(k):
    """Whether a kernel computes exp, log or sin (tinygrad writes them out as polynomials)."""
    from tinygrad.uop.ops import Ops

    return any(u.op in (Ops.EXP2, Ops.LOG2, Ops.SIN) for u in k.ast.toposort())


KEY_BLOCK = VECTOR  # keys a CPU scores at once (attend_in_blocks): one vector of them


def n_key_blocks(positions):
    """How many blocks of KEY_BLOCK keys hold this many positions."""
    return -(-positions // KEY_BLOCK)


def keys_by_block(keys):
    """Keys (B, nh, positions, hs) as attend_in_blocks reads them, (B, nh, blocks, hs, L):
    [b, h, n, d, j] is key L n + j's coordinate d, so one vector load gives coordinate d of L
    neighbouring keys, and a block's keys lie in one run of memory."""
    B, nh, room, hs = keys.shape
    return keys.reshape(B, nh, room // KEY_BLOCK, KEY_BLOCK, hs).transpose(-1, -2)


def attend_in_blocks(q, qkv_cache, cached_blocks, start_pos, blocks):
    """Attention on a CPU over whole blocks of KEY_BLOCK keys, those past the last new position
    masked: the new rows q (B, nh, T, hs) at positions start_pos.. against qkv_cache's keys and
    values (3, B, nh, positions, hs). `cached_blocks` holds the keys again, laid out by
    `keys_by_block`; the new ones are copied in here. `blocks`, like start_pos, is a Variable:
    known only when a compiled call runs, so that one call serves every position.

    tinygrad indexes `q @ k.T` and `weights @ v` over a count of keys known only at run time
    with a division and a modulo per key (it reshapes that count); over a count of whole
    blocks nothing of unknown length is reshaped, and a block's keys are scored as one vector.
    Each row's sums are the same sums in the same order whatever the call's count of rows and
    of blocks (padding adds exact zeros), so a pass over new tokens gives exactly the logits of
    one-token steps. Costs one kernel more per layer (the copy) and the keys' memory again
    (n_layer x positions x n_embd x 4 bytes in fp32: about 102 MB for gpt2-medium)."""
    from tinygrad import Tensor

    B, nh, T, hs = q.shape
    room, L, end = qkv_cache.shape[3], KEY_BLOCK, start_pos + T
    new_keys = cached_blocks.transpose(-1, -2).reshape(B, nh, room, hs)[:, :, start_pos:end]
    new_keys.assign(qkv_cache[1, :, :, start_pos:end])  # (B, nh, T, hs), into their blocks
    k = cached_blocks[:, :, :blocks]  # (B, nh, nb, hs, L)
    v = qkv_cache[2].reshape(B, nh, room // L, L, hs)[:, :, :blocks]  # (B, nh, nb, L, hs)
    att = (q.reshape(B, nh, T, 1, hs, 1) * k.unsqueeze(2)).sum(4) * (1 / hs**0.5)
    keys = Tensor.arange(room).reshape(1, 1, 1, room // L, L)[:, :, :, :blocks]
    future = keys > (Tensor.arange(T) + start_pos).reshape(1, 1, T, 1, 1)  # padding too
    att = future.where(float("-inf"), att)  # (B, nh, T, nb, L)
    # softmax divided after the sum over keys; exp in a kernel of its own: once per key, not
    # once per column of v
    weights = (att - att.max((-2, -1), keepdim=True)).exp().contiguous()
    y = (weights.unsqueeze(-1) * v.unsqueeze(2)).sum((3, 4))  # (B, nh, T, hs)
    return y / weights.sum((-2, -1)).unsqueeze(-1)


def kernel_of_its_own(f, x):
    """f(x), on a CPU in a kernel of its own: an elementwise f such as GELU that would otherwise
    be computed in a matmul's kernel, after its sum, one upcast value after another, which clang
    does not vectorise; alone, a plain loop that it does (install_kernel_rule). Elsewhere, f(x)."""
    if not on_cpu(x.device):
        return f(x)
    return f(x.contiguous()).contiguous()


def compiling(beam=0):
    """The context a compiled call is built in: kernels compiled in this process (so the
    course's rule applies), and tinygrad's kernel search if beam > 0."""
    from tinygrad import Context

    return Context(PARALLEL=0, **({"BEAM": beam} if beam else {}))
