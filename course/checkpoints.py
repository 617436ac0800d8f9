"""GPT-2's files: hub names, downloads with a progress bar and a checksum, safetensors read with
checks, config.json, and the layouts of Hugging Face's checkpoints. `load(name_or_dir)` returns
a `course.gpt2.GPT2`; `save(model, directory)` writes one the way save_pretrained does.

Only safetensors are loaded, never pickled checkpoints (unpickling can run code).
"""

import hashlib
import json
import math
import os
import pathlib
import urllib.request
from dataclasses import fields

import numpy as np

from course.gpt2 import GPT2, Config, padded_vocab, weights
from course.speed import runtime

from tinygrad import Tensor

NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "distilgpt2")
HUB = "https://huggingface.co/{name}/resolve/main/{file}"


# ---------- layouts ----------


def hf_layout(cfg, key, tensor):
    """A weight as GPT-2's files hold it: the vocabulary unpadded (all else is held as is)."""
    return tensor[: cfg.vocab_size] if key == "wte.weight" else tensor


def model_layout(cfg, key, tensor):
    """The inverse of hf_layout: how GPT2 holds a weight read from GPT-2's files (a Tensor or a
    numpy array, returned as the same kind)."""
    if key == "wte.weight":
        rows = ((0, padded_vocab(cfg) - cfg.vocab_size), (0, 0))
        return np.pad(tensor, rows) if isinstance(tensor, np.ndarray) else tensor.pad(rows)
    return tensor


def as_weight(cfg, key, value, like):
    """A weight of the files (a numpy array) or of a model (a Tensor) as the model holds `like`:
    its layout, dtype and device. An array is converted by numpy: a Tensor's cast and padding
    would be kernels to compile, seconds of a model's load on a CPU."""
    value = model_layout(cfg, key, value)
    if isinstance(value, np.ndarray):
        return Tensor(np.ascontiguousarray(value, dtype=like.dtype.fmt), device=like.device)
    return value.to(like.device).cast(like.dtype).contiguous()


def array_of(value):  # a weight of a file (numpy) or of a model (a Tensor)
    return value if isinstance(value, np.ndarray) else value.numpy()


def hf_state_dict(model, prefix="transformer."):
    """The model's weights under save_pretrained's names (tied head left out, as it does)."""
    return {prefix + k: hf_layout(model.config, k, v) for k, v in weights(model).items()}


def parameter_count(model):
    """Parameters as the files count them (the padded vocabulary rows excluded)."""
    return sum(int(np.prod(t.shape)) for t in hf_state_dict(model).values())


def rename(key):
    """Hub keys have no prefix; save_pretrained's start with `transformer.`."""
    return key.removeprefix("transformer.")


def load_state(model, state, source):
    """Copy a state dict (numpy arrays, as read_safetensors returns, or Tensors) into the model,
    checking names and shapes."""
    expected = weights(model)
    got = {rename(k): v for k, v in state.items()}
    # the causal-mask buffers are constants, and lm_head is tied to wte: neither is a weight here
    got = {k: v for k, v in got.items() if not k.endswith((".attn.bias", ".attn.masked_bias"))}
    head = got.pop("lm_head.weight", None)
    missing, unexpected = sorted(expected.keys() - got.keys()), sorted(got.keys() - expected.keys())
    if missing or unexpected:
        raise ValueError(f"{source}: missing weights {missing[:5]}, unexpected {unexpected[:5]}")
    cfg = model.config
    for k, t in expected.items():
        if hf_layout(cfg, k, t).shape != got[k].shape:
            shape = hf_layout(cfg, k, t).shape
            raise ValueError(f"{source}: {k} has shape {got[k].shape}, expected {shape}")
        t.replace(as_weight(cfg, k, got[k], t))
    if head is not None and not np.array_equal(array_of(head), array_of(got["wte.weight"])):
        raise ValueError(f"{source}: lm_head.weight differs from wte.weight; GPT-2 ties them")
    Tensor.realize(*expected.values())
    model.weights_changed()
    return model


# ---------- files ----------


def read_config(path):
    """A gpt2.Config from a Hugging Face config.json (fields it does not need are ignored)."""
    try:
        raw = json.loads(pathlib.Path(path).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not a JSON file ({e})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(raw).__name__}")
    try:
        return Config(
            **{f.name: raw[f.name] for f in fields(Config) if raw.get(f.name) is not None}
        )
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def save(model, directory, extra_config=None):
    """Write config.json and model.safetensors the way save_pretrained does, for `load` to read."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cfg = {f.name: getattr(model.config, f.name) for f in fields(model.config)}
    cfg = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        **cfg,
        **(extra_config or {}),
    }
    (directory / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    arrays = {k: v.float().numpy() for k, v in hf_state_dict(model).items()}
    write_safetensors(arrays, directory / "model.safetensors", metadata={"format": "pt"})


SAFETENSORS_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}
NUMPY_DTYPES = {name: dtype for dtype, name in SAFETENSORS_DTYPES.items()}


def write_safetensors(arrays, path, metadata=None):
    """numpy arrays to a safetensors file: an 8-byte header length, a JSON header, the bytes.

    Written with numpy, not tinygrad's safe_save: tinygrad copies to a file through its CPU
    device, which needs clang, and a GPU machine may have none."""
    header, offset = {"__metadata__": metadata} if metadata else {}, 0
    for name, a in arrays.items():
        if a.dtype not in SAFETENSORS_DTYPES:
            raise ValueError(f"{name}: {a.dtype} arrays are not written here (float32, float16)")
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the spec's alignment: the data starts on 8 bytes
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for a in arrays.values():
            f.write(np.ascontiguousarray(a).tobytes())


def read_safetensors(path):
    """The arrays of a safetensors file (numpy, mapped from the file, not read into memory), or
    one clear error if it is truncated or corrupt or holds other than float32 and float16."""
    try:
        entries, data = safetensors_entries(path)
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as e:
        raise incomplete(path, e) from None
    if other := {dtype for dtype, *_ in entries.values()} - NUMPY_DTYPES.keys():
        # bfloat16 and such: numpy has no type for them (GPT-2's files are float32)
        raise ValueError(f"{path} holds {sorted(other)} weights; the course reads F32 and F16")
    arrays = {}
    for name, (dtype, start, end, shape) in entries.items():
        dtype = NUMPY_DTYPES[dtype]
        if end - start != dtype.itemsize * math.prod(shape):
            raise incomplete(path, f"{name}: {end - start} bytes for a shape of {list(shape)}")
        mapped = end > start  # mmap cannot map 0 bytes
        arrays[name] = np.memmap(path, dtype, "r", data + start, shape) if mapped else (
            np.zeros(shape, dtype))  # fmt: skip
    return arrays


def safetensors_entries(path):
    """{name: (dtype, start, end, shape)} from a safetensors header, and where the data begins."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 0 < n <= os.path.getsize(path) - 8:
            raise ValueError(f"a header of {n} bytes in a file of {os.path.getsize(path)}")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    entries = {k: (v["dtype"], *map(int, v["data_offsets"]), tuple(map(int, v["shape"])))
               for k, v in header.items()}  # fmt: skip
    end = max((e[2] for e in entries.values()), default=0)
    if 8 + n + end != os.path.getsize(path):
        raise ValueError(f"{os.path.getsize(path)} bytes, the header describes {8 + n + end}")
    return entries, 8 + n


def incomplete(path, why):
    return ValueError(
        f"{path} is not a complete safetensors file ({why}); delete it and download it again"
    )


# ---------- downloads ----------


def cache_dir():
    """Where downloads are kept: tinygrad's cache folder (~/.cache/tinygrad/downloads)."""
    return runtime.downloads_dir()


def fetch(url, path):
    """Download url to path, with a progress bar, unless it is there already.

    The bytes go to a `.part` file first and are moved into place only once their count (and
    the hub's sha256, when the response names one) is right: Python's HTTP client does not
    raise when a connection closes early, and a partial file in the cache would break every
    later load.
    """
    from tqdm.auto import tqdm

    path = pathlib.Path(path)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "specmini"})
        with urllib.request.urlopen(request, timeout=30) as r, open(part, "wb") as f:
            size = int(r.headers.get("Content-Length") or 0)
            tag = (r.headers.get("X-Linked-Etag") or r.headers.get("ETag") or "").strip('"')
            sha = hashlib.sha256()
            with tqdm(total=size or None, unit="B", unit_scale=True, desc=path.name) as bar:
                while chunk := r.read(1 << 20):
                    f.write(chunk), sha.update(chunk), bar.update(len(chunk))
        if size and part.stat().st_size != size:
            raise ConnectionError(f"the download stopped at {part.stat().st_size} of {size} bytes")
        if len(tag) == 64 and tag != sha.hexdigest():  # the hub's ETag of a large file: sha256
            raise ConnectionError(f"sha256 {sha.hexdigest()} differs from the hub's {tag}")
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)
    return path


def download(name, file):
    """Fetch one file of a hub model (cached, with a progress bar), or say clearly why not."""
    url, path = HUB.format(name=name, file=file), cache_dir() / name / file
    try:
        return fetch(url, path)  # returns at once when the file is already in the cache
    except OSError as e:  # URLError, timeouts and refused connections are all OSErrors
        raise ConnectionError(
            f"could not download {url} ({e}); place config.json and model.safetensors in "
            f"{cache_dir() / name} (the cache folder), or use a local directory instead"
        ) from e


def load(name_or_dir, half=False, buckets=None, beam=0):
    """A GPT2 from a hub name (`gpt2`, ..., `gpt2-xl`) or a directory holding a HF checkpoint.

    It lives on tinygrad's default device: a GPU when there is one (choose with DEV=CUDA etc.).
    `buckets`: the new-token counts it compiles calls for (default gpt2.BUCKETS). `beam`: the
    width of tinygrad's kernel search when a call compiles (0: none; see GPT2.run).
    """
    if str(name_or_dir) in NAMES:
        config_path, weights_path = (
            download(str(name_or_dir), f) for f in ("config.json", "model.safetensors")
        )
    else:
        directory = pathlib.Path(name_or_dir)
        if not directory.is_dir():
            raise FileNotFoundError(
                f"{name_or_dir!r} is neither a model name ({', '.join(NAMES)}) nor a directory"
            )
        config_path, weights_path = directory / "config.json", directory / "model.safetensors"
        for p in (config_path, weights_path):
            if not p.is_file():
                raise FileNotFoundError(
                    f"{p} not found: a model directory needs config.json and model.safetensors "
                    "(pickled .bin checkpoints are not loaded: unpickling can run code)"
                )
    model = GPT2(read_config(config_path), **({"buckets": buckets} if buckets else {}), beam=beam)
    model = load_state(model, read_safetensors(weights_path), weights_path)
    return model.half() if half else model
