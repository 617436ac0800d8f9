"""course/speed: which CPU runtime tinygrad runs on, the tinygrad internals the course reads
(checked against the pinned version, so that an upgrade fails here, loudly), the course's kernel
rule and the CPU layouts. Both runtimes are run, each in a process of its own: tinygrad reads HCQ2
once."""

import inspect
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from course import checkpoints
from course.speed import TINYGRAD_VERSION, kernel_rule, layouts, runtime

FIXTURE = Path(__file__).parent / "fixtures" / "tiny_gpt2"
UPCAST = "\x1b[33m"  # how tinygrad colours an upcast axis in a kernel's name


def python(code, **env):
    """Run `code` in a fresh Python with `env` on top of this environment (HCQ2 left out)."""
    base = {k: v for k, v in os.environ.items() if k != "HCQ2"}
    done = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_pinned_tinygrad_has_the_internals_the_course_reads():
    from tinygrad import Context, Tensor, TinyJit
    from tinygrad.codegen.opt import Opt, OptOps, heuristic
    from tinygrad.codegen.opt.postrange import Scheduler
    from tinygrad.engine import realize

    assert metadata.version("tinygrad") == TINYGRAD_VERSION, (
        "tinygrad was upgraded: check every function of course/speed/ against the new "
        "version, then change TINYGRAD_VERSION"
    )
    jit = TinyJit(lambda: None)
    assert hasattr(jit, "cnt") and jit.captured is None  # capture_at_once, kernels
    assert hasattr(Tensor, "_buffer")  # read_out
    from tinygrad.helpers import _ensure_downloads_dir  # noqa: F401  downloads_dir

    assert callable(heuristic.hand_coded_optimizations)  # kernel_rule.with_course_rule
    rule_reads = ("upcastable_dims", "axes_of", "full_shape", "rngs", "bufs", "reduceop")
    for name in rule_reads + ("apply_opt", "copy"):
        assert hasattr(Scheduler, name), name  # rows_in_registers, reads, largest_read
    from tinygrad.uop.ops import AxisType

    assert AxisType.REDUCE and AxisType.GROUP_REDUCE  # largest_read
    assert {OptOps.UPCAST} and Opt(OptOps.UPCAST, 0, 4).arg == 4
    with Context(PARALLEL=0):  # compiling
        pass
    # kept_programs: realize's lowering calls to_program by its module-level name
    from tinygrad.codegen import to_program_key
    from tinygrad.helpers import diskcache_get, diskcache_put  # noqa: F401

    assert "to_program(*x[1])" in inspect.getsource(realize._compile_kernel)
    assert callable(to_program_key) and callable(realize.to_program)
    assert 'getenv("HCQ2")' in Path(realize.__file__).read_text()  # runtime.start: read at import
    # Replay runs a captured call's one submit as exec_hcq does: the same steps, the same names
    from tinygrad.engine.jit import CapturedJit
    from tinygrad.runtime.support.hcq2 import HCQInfo

    exec_hcq = inspect.getsource(realize.exec_hcq)
    for step in ("rt_allocator.alloc(", '"hcq_inputs_ptr"', "exec_kernel(", "info.input_idxs"):
        assert step in exec_hcq, step
    assert {"ret", "expected_input_info"} <= set(CapturedJit.__dataclass_fields__)
    assert {"device", "input_idxs"} <= set(HCQInfo.__dataclass_fields__)
    assert callable(realize.resolve_params) and callable(realize.get_runtime)
    from tinygrad.uop.ops import ProgramInfo  # Replay takes a program's values in its own order

    assert {"vars", "global_size", "local_size"} <= set(ProgramInfo.__dataclass_fields__)
    assert "v.expr == 'core_id'" in inspect.getsource(ProgramInfo)  # runtimevars, as vals skips
    # Replay.wait waits as synchronize does, on the same counters and signals (the signals are
    # cached by their arguments: `wait` must ask for them exactly as synchronize does)
    from tinygrad.runtime.ops_cpu import CPUDevice
    from tinygrad.runtime.support.hcq2 import HCQ2Compiled

    on_workers = inspect.getsource(CPUDevice.synchronize)
    for step in ("self.workers", '("put", "done")', "done[0] < put[0]", "super().synchronize("):
        assert step in on_workers, step
    on_timeline = inspect.getsource(HCQ2Compiled.synchronize)
    for step in ('self.signal("timeline")', 'self.signal("value", 1, device="CPU")', "tl[0] - 1"):
        assert step in on_timeline, step
    assert "HCQ_RUNTIME_DEV.value != self.device" in on_timeline and "prof_ents" in on_timeline


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"DEV": "CPU"}, "HCQ2"),  # a CPU, said so: the faster runtime
        ({"DEV": "CPU", "HCQ2": "0"}, "default"),  # the way back
        ({"DEV": "NULL"}, "default"),  # not the CPU: never HCQ2
    ],
)
def test_the_runtime_is_hcq2_on_a_cpu_unless_asked_otherwise(env, expected):
    code = "import os, course.gpt2\nprint(course.speed.runtime.name(), os.environ.get('HCQ2'))"
    name, left = python(code, **env).split()
    assert name == expected
    assert left == env.get("HCQ2", "None")  # the setting does not leak to child processes


def test_importing_tinygrad_first_is_a_clear_error_not_a_slow_runtime():
    code = (
        "import tinygrad\n"
        "try:\n    import course.gpt2\n"
        "except RuntimeError as e:\n    print('error:', 'import course.gpt2' in str(e))"
    )
    assert python(code, DEV="CPU") == "error: True"
    assert python("import tinygrad, course.gpt2\nprint('ok')", DEV="CPU", HCQ2="0") == "ok"


def test_importing_the_course_changes_nothing_global():
    # course and its toy-level modules import no tinygrad (notebooks 01-05 never load it), and
    # course.gpt2 leaves tinygrad's heuristics and loads as they were: the rule applies only
    # while a call compiles (kernel_rule.compiling)
    code = (
        "import sys, course, course.toys, course.exact, course.speedup, course.timing\n"
        "from course.lessons import lesson_01, lesson_02, lesson_03, lesson_04, lesson_05\n"
        "print('tinygrad' in sys.modules)"
    )
    assert python(code) == "False"
    fixture = str(FIXTURE)
    code = (
        "import tinygrad.codegen as codegen, tinygrad.engine.realize as realize\n"
        "from tinygrad.codegen.opt import heuristic\n"
        "swapped = lambda: (heuristic.hand_coded_optimizations, codegen.memory_coalescing,\n"
        "                   realize.to_program)\n"
        "before = swapped()\n"
        "from course import checkpoints\n"
        "from course.speed import kernel_rule\n"
        f"model = checkpoints.load({fixture!r}, buckets=(1,))\n"
        "model([1, 2, 3], 0)\n"
        "after = swapped()\n"
        "with kernel_rule.compiling():\n"
        "    inside = swapped()\n"
        "from tinygrad import Device\n"
        "render = 'render' in vars(Device['CPU'].renderer)  # prefetching: set while compiling\n"
        "print(before == after, all(i != b for i, b in zip(inside, before)), render)"
    )
    assert python(code, HCQ2="0") == "True True False"


LOGITS = f"""
import json, course, numpy as np
from course import checkpoints, gpt2
from course.speed import runtime
model = checkpoints.load({str(FIXTURE)!r}, buckets=(1, 5))  # a prompt in chunks of 5
tokens = [int(t) for t in np.random.default_rng(0).integers(0, model.config.vocab_size, 30)]
model(tokens[:24], 0)
calls, other = [], tokens[:24] + [(t + 1) % model.config.vocab_size for t in tokens[24:]]
for seq in (tokens, other):  # a compiled call's first call captures it; on HCQ2 the next replay
    calls.append(model(seq[:25], 24))  # one new token against the cache
    calls.append(model(seq[:29], 24))  # a pass over 5 new tokens
np.save(OUT, np.concatenate(calls))
replayed = [n for n, jit in model.compiled.items() if getattr(jit, "course_replay", False)]
print(json.dumps({{"runtime": runtime.name(), "replayed": sorted(replayed),
                  "kernels": {{n: len(k) for n, k in gpt2.kernel_counts(model).items()}}}}))
"""


def test_both_runtimes_give_identical_logits_and_count_the_same_kernels(tmp_path):
    seen = {}
    for hcq2 in ("1", "0"):
        out = tmp_path / f"logits{hcq2}.npy"
        seen[hcq2] = json.loads(python(f"OUT = {str(out)!r}\n" + LOGITS, DEV="CPU", HCQ2=hcq2))
        seen[hcq2]["logits"] = np.load(out)
    fast, default = seen["1"], seen["0"]
    assert (fast["runtime"], default["runtime"]) == ("HCQ2", "default")
    assert np.array_equal(fast["logits"], default["logits"])  # the same kernels, bit for bit
    assert not np.allclose(fast["logits"][:6], fast["logits"][6:])  # other tokens, other logits
    assert (fast["replayed"], default["replayed"]) == ([1, 5], [])
    assert fast["kernels"] == default["kernels"] and all(fast["kernels"].values())


def test_a_second_process_builds_from_the_kept_programs_with_identical_logits(tmp_path):
    # kernel_rule.kept_programs: a fresh cache, a first process that fills it, and a second whose
    # tinygrad cannot generate any kernel's code itself: every kernel must come from the cache
    cache = {"CACHEDB": str(tmp_path / "cache.db"), "DEV": "CPU"}
    first, second = tmp_path / "first.npy", tmp_path / "second.npy"
    python(f"OUT = {str(first)!r}\n" + LOGITS, **cache)
    no_codegen = (  # inside compiling() only: loading and folding compile kernels outside it
        "import course.gpt2, tinygrad.engine.realize as realize\n"
        "from tinygrad.codegen.opt import heuristic\n"
        "generate = realize.to_program\n"
        "def refuse(ast, renderer):\n"
        "    if hasattr(heuristic.hand_coded_optimizations, 'course_rule'):\n"
        "        raise AssertionError('a kernel was generated again, not read from the cache')\n"
        "    return generate(ast, renderer)\n"
        "realize.to_program = refuse\n"
    )
    python(no_codegen + f"OUT = {str(second)!r}\n" + LOGITS, **cache)
    assert np.array_equal(np.load(first), np.load(second))
    # and the test can fail: without the cache's file, the second process generates kernels
    done = subprocess.run(
        [sys.executable, "-c", no_codegen + f"OUT = {str(second)!r}\n" + LOGITS],
        env={**os.environ, "CACHEDB": str(tmp_path / "empty.db"), "DEV": "CPU"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode != 0 and "not read from the cache" in done.stderr


PREFETCH = """
from course import gpt2  # tinygrad on the course's runtime
from course.speed import kernel_rule, layouts
import numpy as np
from tinygrad import Tensor
rng = np.random.default_rng(0)
x = rng.normal(size=(3, 512)).astype(np.float32)
big, small = (rng.normal(size=(512, n)).astype(np.float32) for n in (256, 64))
with kernel_rule.compiling():  # a pass's rows against large weights, then small ones
    for w in (big, small):
        y = layouts.matmul(Tensor(x), layouts.lay_out(Tensor(w)).realize()).numpy()
        np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-4)
"""


def test_a_matmul_asks_for_large_weights_ahead_and_small_ones_not(tmp_path):
    # kernel_rule.prefetching, seen in the kernels' C source (DEBUG=4 prints it as it compiles,
    # on an empty cache); the products are checked against numpy in the subprocess
    cache = {"CACHEDB": str(tmp_path / "cache.db"), "DEV": "CPU", "DEBUG": "4"}
    done = subprocess.run(
        [sys.executable, "-c", PREFETCH], env={**os.environ, **cache},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    sources = re.split(r"\n(?=(?:typedef [^\n]*\n)*void )", done.stdout)
    matmuls = {
        n: "__builtin_prefetch" in source
        for source in sources
        for n in re.findall(r"void (r_\w+_512)\(", source)
    }
    assert len(matmuls) == 2, list(matmuls)  # one kernel each
    assert sorted(matmuls.values()) == [False, True], matmuls  # 128K values: yes; 32K: no
    assert kernel_rule.PREFETCH_FROM == 1 << 16


def test_laid_out_weights_give_the_same_products_and_only_on_a_cpu():
    from tinygrad import Tensor

    rng = np.random.default_rng(0)
    x = Tensor(rng.normal(size=(5, 24)).astype(np.float32))
    w = Tensor(rng.normal(size=(24, 3 * layouts.VECTOR)).astype(np.float32)).realize()
    packed = layouts.lay_out(w).realize()
    assert packed.shape == (3, 24, layouts.VECTOR)  # VECTOR outputs in one run
    assert np.array_equal(packed.numpy()[1, :, 3], w.numpy()[:, layouts.VECTOR + 3])
    np.testing.assert_allclose(layouts.matmul(x, packed).numpy(), (x @ w).numpy(), rtol=1e-6)
    assert layouts.lay_out(w[:, :36]).shape == (24, 36)  # 36 outputs: not in runs of VECTOR
    on_gpu = Tensor.empty(24, 48, device="NULL")  # a GPU's threads read neighbouring outputs
    assert layouts.lay_out(on_gpu) is on_gpu


def test_the_rule_keeps_a_passes_rows_in_registers():
    model = checkpoints.load(FIXTURE, buckets=(1, 5))
    model.compile()
    names = [k.name for k in runtime.kernels(model.compiled[5])]
    rows_upcast = [n for n in names if n.startswith("r") and f"{UPCAST}5\x1b" in n]
    # each block's four matmuls (q/k/v, attention out, MLP in, MLP out) read W once for 5 rows,
    # and its two attention products read each cached key and value once for them; the head too
    # (q/k/v kept its rows in a loop until the rule picked rows by the weights they share)
    assert len(rows_upcast) == 6 * model.config.n_layer + 1, names
    # weights held (in, out): attention out, MLP in and MLP out load VECTOR neighbouring outputs'
    # weights as vectors for all 5 rows (q/k/v too where a head's width is a multiple of VECTOR;
    # the fixture's heads are 12 wide), and the scores a block of keys (layouts.attend_in_blocks);
    # the output head too, packed like them. Fails if the rule finds no output axis of stride 1.
    vectors = [n for n in rows_upcast if f"{UPCAST}{layouts.VECTOR}\x1b" in n]
    assert len(vectors) == 4 * model.config.n_layer + 1, names
    # each block's GELU (a kernel of its own) and softmax's exp: plain loops, which clang
    # vectorises; tinygrad's upcast would leave them scalar (fails without the rule's branch)
    plain = [n for n in names if n.startswith("E") and UPCAST not in n]
    assert len(plain) == 2 * model.config.n_layer, names


def test_the_rule_leaves_kernels_it_does_not_fit_to_tinygrad():
    from tinygrad import Tensor

    x = Tensor.arange(7 * 3).reshape(7, 3).float()
    assert x.sum(1).tolist() == [float(3 * i * 3 + 3) for i in range(7)]  # no crash, right sums


def test_cpu_kernels_load_wide_vectors(capfd):
    from tinygrad import Context, Tensor

    rng = np.random.default_rng(1)
    x = Tensor(rng.normal(size=(5, 64)).astype(np.float32))
    w = Tensor(rng.normal(size=(64, 48)).astype(np.float32)).realize()
    packed = layouts.lay_out(w).realize()
    with kernel_rule.compiling(), Context(DEBUG=4, CACHELEVEL=0):  # source printed: no cache
        y = layouts.matmul(x, packed).numpy()
    # one load per VECTOR weights (tinygrad's own pass loads at most 4 floats at once)
    assert f"ext_vector_type({kernel_rule.WIDEST_LOAD})" in capfd.readouterr().out
    np.testing.assert_allclose(y, x.numpy() @ w.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("start, T", [(21, 3), (16, 1), (14, 2)])  # mid-block, edges
def test_attention_on_a_cpu_finds_each_key_without_a_division(capfd, start, T):
    from tinygrad import Context, Tensor, UOp

    # a cache as GPT2 keeps it, T new rows at a symbolic position against symbolic key blocks
    B, nh, hs, L = 1, 2, 8, layouts.KEY_BLOCK
    room = 4 * L
    cache = Tensor(np.random.default_rng(2).normal(size=(3, B, nh, room, hs)).astype(np.float32))
    cache = cache.realize()
    old = cache.numpy()[1].copy()
    old[:, :, start : start + T] = 0  # the new rows' keys are not in the blocks yet: copied in
    by_block = layouts.keys_by_block(Tensor(old)).contiguous().realize()
    pos = UOp.variable("start_pos", 0, room - T).bind(start)
    blocks = UOp.variable("key_blocks", 1, room // L).bind(layouts.n_key_blocks(start + T))
    q = cache[0, :, :, pos : pos + T]
    with kernel_rule.compiling(), Context(DEBUG=4, CACHELEVEL=0):  # source printed: no cache
        y = layouts.attend_in_blocks(q, cache, by_block, pos, blocks).numpy()
    out = capfd.readouterr().out
    kernels = re.findall(r"void ([rE]_\w+)\((.*?\n)}", out, re.S)  # tinygrad's own: hcq_, *_prog
    assert any("key_blocks" in name for name, _ in kernels), [name for name, _ in kernels]
    # tinygrad's q @ k.T over a symbolic count of keys found each with "/" and "%" on ints
    for name, body in kernels:
        assert "%" not in body and not re.search(r"int \w+ = [^;]*/|/\s*\d", body), name
    c = cache.numpy()[:, 0]
    q, k, v = c[0, :, start : start + T], c[1, :, : start + T], c[2, :, : start + T]
    att = np.einsum("htd,hkd->htk", q, k) / np.sqrt(hs)
    att = np.where(np.arange(start + T) > start + np.arange(T)[:, None], -np.inf, att)
    w = np.exp(att - att.max(-1, keepdims=True))
    want = np.einsum("htk,hkd->htd", w / w.sum(-1, keepdims=True), v)
    np.testing.assert_allclose(y[0], want, rtol=1e-5, atol=1e-5)


def test_a_replay_waits_on_its_own_views_and_leaves_odd_cases_to_tinygrad(monkeypatch):
    if runtime.name() != "HCQ2":
        pytest.skip("Replay runs on HCQ2 only")
    model = checkpoints.load(FIXTURE, buckets=(1, 16))
    tokens = [int(t) for t in np.random.default_rng(2).integers(0, model.config.vocab_size, 24)]
    model(tokens[:20], 0)
    expected = model(tokens[:21], 20)  # the first call of bucket 1 captures it
    replay = model.compiled[1].course_replay = runtime.Replay.of(model.compiled[1])
    device, waits = replay.device, []
    address = lambda view: np.frombuffer(view, np.uint64).__array_interface__["data"][0]  # noqa: E731
    counters = [(w.put, w.done) for w in device.workers]  # the views are of these, in order
    for (put, done), (goal, reached, lag) in zip(counters, replay.signals, strict=False):
        assert (address(goal), address(reached), lag) == (put._buf.va_addr, done._buf.va_addr, 0)
    synchronize = device.synchronize
    monkeypatch.setattr(device, "synchronize", lambda *a: waits.append(1) or synchronize(*a))

    def call():
        model.cached = tokens[:20]
        return model(tokens[:21], 20)

    assert np.array_equal(call(), expected) and waits == []  # its own wait, not synchronize's
    odd_cases = [
        (replay, "SPINS", 0),  # past its turns (a hung worker raises in synchronize)
        (device, "prof_ents", [object()]),  # profiling
        (device, "workers", [*device.workers, device.workers[0]]),  # a worker new since the views
    ]
    for obj, name, value in odd_cases:
        with monkeypatch.context() as m:
            m.setattr(obj, name, value)
            assert np.array_equal(call(), expected), name
        assert waits.pop() and waits == [], name  # left to synchronize, once


def test_each_file_of_the_speed_machinery_lists_the_internals_it_reads():
    import course.speed

    folder = Path(course.speed.__file__).parent
    files = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    assert files == ["kernel_rule", "layouts", "runtime"]
    for module in (kernel_rule, layouts, runtime):
        assert isinstance(module.INTERNALS, tuple), module.__name__
    assert runtime.INTERNALS and kernel_rule.INTERNALS and layouts.INTERNALS == ()
    # layouts reads only tinygrad's public API (Tensor's methods)
    source = (folder / "layouts.py").read_text()
    private = re.findall(r"\._[a-z]\w*|tinygrad\.(?!Tensor)\w+", source)
    assert not private, private


def test_one_place_runs_tinygrads_source_edited():
    root = Path(__file__).resolve().parent.parent
    sources = [p for d in ("course", "benchmarks", "scripts") for p in (root / d).rglob("*.py")]
    assert len(sources) > 20
    editing = [p.name for p in sources if "exec(compile(" in p.read_text()]
    assert editing == ["kernel_rule.py"], editing
