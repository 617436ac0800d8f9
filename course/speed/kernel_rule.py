"""The course's kernel rule: how tinygrad 0.14 builds a CPU kernel with a sum (a matmul), so that a
pass over K + 1 new tokens reads each weight once for all of them, not once per token, and asks
for the weights before it needs them.

It applies while `compiling()` holds, which is where a GPT-2 call is built (course.gpt2, through
runtime.run); outside it tinygrad is as it was, for any other tinygrad code in the process.
"""

import contextlib
import functools
import hashlib
import math
from pathlib import Path

WIDEST_LOAD = 16  # 32-bit values a CPU kernel may load as one vector: AVX-512 1 register, AVX2 2
VECTOR = WIDEST_LOAD  # outputs a CPU kernel updates per weight load: one vector of weights
ACCUMULATORS = 16  # independent sums a matmul kernel keeps in flight (AVX2: 16 vector registers)
AHEAD = 1024  # bytes of weights a matmul kernel asks for before it reads them (prefetched)
PREFETCH_FROM = 1 << 16  # values in a summed-over input from which its reads are prefetched
# tinygrad 0.14's line that caps a vector load at 4 values (memory_coalescing; wide_loads)
TINYGRAD_LOADS = (
    'lengths = [8,4,2] if buf.dtype == dtypes.half and getenv("ALLOW_HALF8") else [4,2]'
)
# What this file reads of tinygrad beyond its public API (tests/test_runtime.py checks each)
INTERNALS = (
    "tinygrad.codegen.opt.heuristic.hand_coded_optimizations: swapped while compiling()",
    "tinygrad.codegen.memory_coalescing: swapped while compiling() (wide_loads)",
    "tinygrad.engine.realize.to_program: swapped while compiling() (kept_programs); "
    "tinygrad.codegen.to_program_key; helpers.diskcache_get/put",
    "Scheduler.upcastable_dims, axes_of, full_shape, rngs, bufs, reduceop, ren, ast, "
    "apply_opt, copy (rows_in_registers, threads, reads, largest_read)",
    "Opt, OptOps.UPCAST/THREAD, KernelOptError, AxisType.REDUCE/GROUP_REDUCE/WEAK",
    "Ops.ADD, EXP2, LOG2, SIN; UOp.split_uop, get_idx, backward_slice, toposort",
    "Context(PARALLEL=..., BEAM=...)",
    "Renderer.render(uops) per instance (prefetching); Ops.CUSTOM rendered as C by ClangRenderer",
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


def with_course_rule(hand_coded):
    """tinygrad's heuristics `hand_coded` with `rows_in_registers` in front of them for CPU
    kernels with a sum; a CPU kernel computing exp, log or sin without a sum is left as a plain
    loop, which clang vectorises (an upcast one is 7x slower: GELU)."""
    if getattr(hand_coded, "course_rule", False):  # compiling() inside compiling()
        return hand_coded
    from tinygrad.codegen.opt import KernelOptError

    def optimize(k):
        if k.ren.target.device == "CPU" and k.reduceop is None and transcendental(k):
            return k
        if k.ren.target.device == "CPU" and k.reduceop is not None:
            try:
                ruled, finished = rows_in_registers(k.copy())
                if finished:
                    return ruled
                k = ruled
            except KernelOptError:  # a shape the rule does not fit: tinygrad's alone
                pass
        return hand_coded(k)

    optimize.course_rule = True
    return optimize


@functools.cache
def wide_loads():
    """tinygrad's `memory_coalescing`, letting a CPU kernel load up to WIDEST_LOAD neighbouring
    values as one vector, not 4.

    tinygrad 0.14 groups a kernel's loads and stores into vectors of at most 4 values, so clang
    computes a matmul's sums 4 at a time even where the CPU has 8 (AVX2) or 16 (AVX-512) lanes:
    a pass over several tokens uses only part of each vector. Wider loads keep the logits
    identical. tinygrad has no setting for it: its module is executed anew from its own source
    with that one line (TINYGRAD_LOADS) changed, for CPU kernels only (any 32-bit or 16-bit
    buffer, loads and stores). The copy is used while `compiling()` holds; tinygrad's own module
    stays as it is. The one place in the course that runs tinygrad's source edited, and why it
    stays: without it a pass over 6 new tokens costs about 2.0 steps instead of 1.4, and the
    speed-up falls from about 2.1x to 1.7x (benchmarks/README.md, "The speed machinery moved")."""
    import inspect

    from tinygrad.codegen.late import coalesce

    source = inspect.getsource(coalesce)
    if TINYGRAD_LOADS not in source:
        raise RuntimeError("tinygrad's memory_coalescing changed: check kernel_rule.wide_loads")
    wide = [WIDEST_LOAD >> i for i in range(WIDEST_LOAD.bit_length() - 1)]  # 16, 8, 4, 2
    elsewhere = TINYGRAD_LOADS.removeprefix("lengths = ")
    cpu_line = f'lengths = {wide} if ctx.target.device == "CPU" else {elsewhere}'
    namespace = {"__name__": coalesce.__name__}  # a copy of the module
    exec(compile(source.replace(TINYGRAD_LOADS, cpu_line), coalesce.__file__, "exec"), namespace)
    return namespace["memory_coalescing"]


def transcendental(k):
    """Whether a kernel computes exp, log or sin (tinygrad writes them out as polynomials)."""
    from tinygrad.uop.ops import Ops

    return any(u.op in (Ops.EXP2, Ops.LOG2, Ops.SIN) for u in k.ast.toposort())


@contextlib.contextmanager
def compiling(beam=0):
    """The context a GPT-2 call is built in: the course's kernel rule in front of tinygrad's
    heuristics, wide loads and prefetched weights on a CPU, kernels compiled in this process
    (tinygrad's worker processes would use its heuristics alone) and kept on disk for the next
    (kept_programs), and tinygrad's kernel search if beam > 0. On leaving it, tinygrad is as it
    was."""
    import tinygrad.codegen as codegen
    import tinygrad.engine.realize as realize
    from tinygrad import Context
    from tinygrad.codegen.opt import heuristic

    saved = heuristic.hand_coded_optimizations, codegen.memory_coalescing, realize.to_program
    heuristic.hand_coded_optimizations = with_course_rule(saved[0])
    codegen.memory_coalescing = wide_loads()  # the name tinygrad's pipeline calls
    realize.to_program = kept_programs(saved[2])
    try:
        with Context(PARALLEL=0, **({"BEAM": beam} if beam else {})):
            yield
    finally:
        heuristic.hand_coded_optimizations, codegen.memory_coalescing, realize.to_program = saved


def kept_programs(to_program):
    """tinygrad's `to_program` (a kernel's code generated and compiled), its results kept in
    tinygrad's cache on disk, as tinygrad keeps its compiler's output but not this step's: a
    model's call built again in a new process (a notebook run twice) skips about 40% of the
    build. Each result is kept under the kernel, tinygrad's settings and this file's text (the
    rule decides the code); CACHELEVEL=0 turns it off, as it does tinygrad's own cache."""
    from tinygrad.codegen import to_program_key
    from tinygrad.helpers import diskcache_get, diskcache_put

    def kept(ast, renderer):
        ast_key, kind, *rest = to_program_key(ast, renderer)
        key = hashlib.sha256(repr((ast_key, kind.__qualname__, *rest, RULE)).encode()).hexdigest()
        if (program := diskcache_get("course_programs", key)) is None:
            with prefetching(renderer):
                program = diskcache_put("course_programs", key, to_program(ast, renderer))
        return program

    return kept


@contextlib.contextmanager
def prefetching(renderer):
    """While it holds, a CPU kernel that sums over a large input a vector at a time (a matmul's
    weights) asks for each vector AHEAD bytes before it reads it (`__builtin_prefetch`).

    Without it a core reads the weights only as fast as its out-of-order window lets loads wait
    for memory, and a pass over several tokens, with more arithmetic per weight, waits longer
    per weight: its time is the read plus the arithmetic. Asked for ahead, the weights stream
    in while the core computes, and a pass over a few tokens costs about a read of the weights,
    as a step does (benchmarks/README.md). The values are the same: a prefetch reads nothing."""
    if renderer.target.device != "CPU":
        yield
        return
    render = type(renderer).render

    def with_prefetches(uops):
        return render(renderer, list(prefetched(uops)))

    renderer.render = with_prefetches
    try:
        yield
    finally:
        del renderer.render


def prefetched(uops):
    """A kernel's linearized uops, with a prefetch after each vector load of its largest input
    that a sum runs over (at least PREFETCH_FROM values)."""
    from tinygrad.dtype import dtypes
    from tinygrad.uop.ops import AxisType, Ops, UOp

    def summed_input(load):  # the input a vector load reads inside a sum, or None
        reads = load.src[0].toposort()
        sums = (AxisType.REDUCE, AxisType.GROUP_REDUCE)
        if load.max_numel() > 1 and any(u.op is Ops.RANGE and u.arg[-1] in sums for u in reads):
            return next((u for u in reads if u.op is Ops.PARAM), None)
        return None

    inputs = {u: p for u in uops if u.op is Ops.LOAD and (p := summed_input(u)) is not None}
    largest = max(dict.fromkeys(inputs.values()), key=lambda p: math.prod(p.shape), default=None)
    if largest is None or math.prod(largest.shape) < PREFETCH_FROM:  # stays in a core's cache
        yield from uops
        return
    ahead = f"__builtin_prefetch((const char*)({{0}}) + {AHEAD}, 0, 3);"  # {0}: the address
    for u in uops:
        yield u
        if inputs.get(u) is largest:
            yield UOp(Ops.CUSTOM, dtypes.void, (u.src[0],), ahead)


RULE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()  # this file's text
