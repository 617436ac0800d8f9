"""How the course's GPT-2 lays out its weights and its KV cache for the device it runs on.

On a GPU, as they are. On a CPU (tinygrad 0.14's clang backend): each linear layer's weights
packed in runs of VECTOR outputs, the keys cached again in blocks of KEY_BLOCK, the norm's gain
and the GELU each in a kernel of their own. The logits are the same (tests/test_gpt2.py); a step
and a pass are faster (benchmarks/README.md). course.gpt2 reaches all of it through `lay_out`,
`matmul`, `scale`, `kernel_of_its_own` and `make_cache`.

Reads nothing of tinygrad beyond its public API.
"""

from course.speed.kernel_rule import VECTOR
from course.speed.runtime import on_cpu

from tinygrad import Tensor

INTERNALS = ()  # this file reads none


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


def scale(x, gain):
    """x * gain, for a folded norm (course.gpt2.NormLinear): on a CPU, for several rows, stored
    first, or a CPU's matmul redoes the products for every VECTOR outputs (5 rows: 1.7x longer)."""
    xg = x * gain
    return xg.contiguous() if x.shape[-2] > 1 and on_cpu(x.device) else xg


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


class KVCache:
    """q, k and v of every position, batch 1: (3, 1, nh, room, hs). `attend` writes the new rows'
    and attends to every position up to theirs. The layout a GPU reads."""

    def __init__(self, n_head, room, head_size, dtype, device):
        shape = (3, 1, n_head, room, head_size)
        self.qkv = Tensor.zeros(*shape, dtype=dtype, device=device).contiguous()

    def buffers(self):  # what GPT2.fold realizes
        return [self.qkv]

    def attend(self, qkv, start_pos, key_blocks):
        """softmax(q k^T / sqrt(hs)) v for T new rows qkv (3, B, nh, T, hs) at positions start_pos
        on, each against the cached keys up to its own position; returns (B, nh, T, hs).
        `key_blocks` (whole blocks of keys up to the last new position) is for the CPU's layout."""
        T, hs = qkv.shape[3], qkv.shape[4]
        end = start_pos + T
        # q is cached too, so that the matmul writes its whole output straight into the cache
        self.qkv[:, :, :, start_pos:end, :].assign(qkv)
        q = self.qkv[0, :, :, start_pos:end, :]  # (B, nh, T, hs)
        k, v = self.qkv[1, :, :, :end, :], self.qkv[2, :, :, :end, :]  # (B, nh, end, hs)
        att = q @ k.transpose(-1, -2) * (1 / hs**0.5)  # (B, nh, T, end)
        if T > 1:  # new token i sits at position start_pos + i and sees keys 0 .. start_pos + i
            keys = Tensor.arange(self.qkv.shape[3])[:end]  # arange(end) would be O(end^2)
            future = keys.reshape(1, end) > Tensor.arange(T).reshape(T, 1) + start_pos
            att = future.where(float("-inf"), att)  # compared in place: no mask buffer
        # softmax, divided after the sum over keys: one kernel less than softmax(att) @ v
        weights = (att - att.max(-1, keepdim=True)).exp()
        return (weights @ v) / weights.sum(-1, keepdim=True)  # (B, nh, T, hs)


class BlockedKVCache(KVCache):
    """On a CPU: the keys again, in blocks of KEY_BLOCK (`keys_by_block`), which
    `attend_in_blocks` scores a vector at a time."""

    def __init__(self, n_head, room, head_size, dtype, device):
        super().__init__(n_head, room, head_size, dtype, device)
        self.keys_by_block = keys_by_block(self.qkv[1]).contiguous()

    def buffers(self):
        return [self.qkv, self.keys_by_block]

    def attend(self, qkv, start_pos, key_blocks):
        T = qkv.shape[3]
        self.qkv[:, :, :, start_pos : start_pos + T, :].assign(qkv)
        q = self.qkv[0, :, :, start_pos : start_pos + T, :]  # (B, nh, T, hs)
        return attend_in_blocks(q, self.qkv, self.keys_by_block, start_pos, key_blocks)


def make_cache(n_head, positions, head_size, dtype, device):
    """A KV cache with room for `positions`, in whole blocks of keys, laid out for the device."""
    room = n_key_blocks(positions) * KEY_BLOCK
    kind = BlockedKVCache if on_cpu(device) else KVCache
    return kind(n_head, room, head_size, dtype, device)


def kernel_of_its_own(f, x):
    """f(x), on a CPU in a kernel of its own: an elementwise f such as GELU that would otherwise
    be computed in a matmul's kernel, after its sum, one upcast value after another, which clang
    does not vectorise; alone, a plain loop that it does (kernel_rule.with_course_rule).
    Elsewhere, f(x)."""
    return f(x.contiguous()).contiguous() if on_cpu(x.device) else f(x)
