"""The two frameworks the benchmark measures, on the same weights and behind one protocol:

- `plain(prompt, n, temperature, seed)`: the target alone, n new tokens;
- `spec(prompt, n, k, temperature, seed)`: speculative decoding with K = k;
  both return a specmini.Generation: its tokens, and its rounds where the framework reports them
  (tinygrad, through specmini; transformers does not, so its rounds are None);
- `step()`: one new token at a warm cache (the case's prompt); `verify(k)`: one pass over k + 1
  new tokens at the same cache; `draft_step()`: the draft's step (timed for tinygrad only);
- `reset()`: empty caches before a whole run; `compile()`: every compiled call built, untimed;
- `read_prompt(prompt)` (tinygrad only): the prompt into the caches before the race's clock starts.
  transformers' `generate` reads its prompt inside every timed run (assisted generation cannot
  start from a cache), so its per-token times include the prompt and tinygrad's do not: a
  difference in its disfavour, of about one prompt's reading per 128 tokens;
- `kernels()`: kernels launched per call, or None where they are not counted.
"""

import specmini
from course import checkpoints, gpt2

from tinygrad import Device
from tinygrad.helpers import GlobalCounters


class Tinygrad:
    """course/gpt2.py through its public API, as the course uses it."""

    name = "tinygrad"

    def __init__(self, case, beam=0):
        self.prompt = case.prompt
        # a compiled call for each pass timed or raced (K + 1 new tokens), one token, and prompts
        buckets = gpt2.calls_for(case.verify_ks + case.race_ks)
        self.target = checkpoints.load(case.target, beam=beam, buckets=buckets)
        self.draft = checkpoints.load(case.draft, beam=beam, buckets=gpt2.CALLS["draft"])
        self.layers = self.target.config.n_layer

    def plain(self, prompt, n, temperature, seed):
        return specmini.autoregressive(self.target, prompt, n, temperature=temperature, seed=seed)

    def spec(self, prompt, n, k, temperature, seed):
        return specmini.generate(
            self.target, self.draft, prompt, n, k=k, temperature=temperature, seed=seed
        )

    def step(self):
        # the cache holds prompt[:-1] from the previous call: only the last token is computed
        self.target(self.prompt, len(self.prompt) - 1)

    def verify(self, k):
        self.target(self.prompt + self.prompt[:k], len(self.prompt) - 1)

    def draft_step(self):
        self.draft(self.prompt, len(self.prompt) - 1)

    def reset(self):
        self.target.reset(), self.draft.reset()

    def read_prompt(self, prompt):  # timing.race: the prompt read before the clock starts
        self.target.read_prompt(prompt), self.draft.read_prompt(prompt)

    def compile(self):  # every compiled call built before the race times anything
        self.target.compile(), self.draft.compile()

    def kernels(self):
        """Kernels launched per call: counted here, and by gpt2.kernel_counts per compiled call."""
        counted = {"step": launches(self.step), "verify K=4": launches(lambda: self.verify(4))}
        reported = {
            str(n): len(programs) for n, programs in gpt2.kernel_counts(self.target).items()
        }
        per_block = {k: v / self.layers for k, v in counted.items()}
        return {"counted": counted, "per_block": per_block, "gpt2_kernel_counts": reported}


def launches(call):
    """Kernels one call launches (tinygrad counts JIT replays too)."""
    before = GlobalCounters.kernel_count
    call()
    return GlobalCounters.kernel_count - before


class Transformers:
    """The peer: GPT2LMHeadModel on the same directory, float32, eval, no grad; on the GPU when
    tinygrad runs on one (CUDA), else on the CPU. Speculative = assisted generation with the
    same draft and K."""

    name = "transformers"

    def __init__(self, case):
        import torch
        import transformers
        from transformers import DynamicCache, GenerationConfig, GPT2LMHeadModel

        transformers.logging.set_verbosity_error()  # its deprecation notes would bury the table
        transformers.logging.disable_progress_bar()
        torch.set_grad_enabled(False)
        self.torch, self.prompt, self.generation_config = torch, case.prompt, GenerationConfig
        on_gpu = Device.DEFAULT in ("CUDA", "NV") and torch.cuda.is_available()
        self.device = torch.device("cuda" if on_gpu else "cpu")

        def load(d):
            # no end-of-text token (the byte-level pair has no 50256): every run makes exactly
            # n tokens, as specmini does
            kw = {"bos_token_id": None, "eos_token_id": None}
            model = GPT2LMHeadModel.from_pretrained(d, dtype=torch.float32, **kw)
            return model.to(self.device).eval()

        self.target, self.draft = load(case.target), load(case.draft)
        self.ids = self.tensor([case.prompt])
        # the warm cache for step and verify: prompt[:-1], cropped back after every call
        self.cache = DynamicCache(config=self.target.config)
        self.target(self.ids[:, :-1], past_key_values=self.cache, use_cache=True)

    def plain(self, prompt, n, temperature, seed):
        return self.generate(prompt, n, temperature, seed)

    def spec(self, prompt, n, k, temperature, seed):
        # the candidate generator reads these from the draft's own generation config: K drafts
        # every round, as specmini.generate, and no early stop on the draft's confidence
        drafting = self.draft.generation_config
        drafting.num_assistant_tokens, drafting.num_assistant_tokens_schedule = k, "constant"
        drafting.assistant_confidence_threshold = 0
        return self.generate(prompt, n, temperature, seed, assistant=self.draft)

    def generate(self, prompt, n, temperature, seed, assistant=None):
        self.torch.manual_seed(seed)
        # sampling from the whole distribution: transformers' default top_k of 50 is switched off
        sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
        decoding = sampling if temperature > 0 else dict(do_sample=False)
        config = self.generation_config(
            max_new_tokens=n, eos_token_id=None, pad_token_id=0, **decoding
        )
        ids = self.tensor([prompt])
        out = self.target.generate(ids, generation_config=config, assistant_model=assistant)
        return specmini.Generation(out[0, len(prompt) :].tolist(), rounds=None)  # not reported

    def tensor(self, ids):
        return self.torch.tensor(ids, device=self.device)

    def forward(self, ids):
        out = self.target(ids, past_key_values=self.cache, use_cache=True).logits
        self.cache.crop(-ids.shape[1])  # transformers 5: a negative count of tokens to drop
        return out.cpu()  # waits for the GPU, as tinygrad's read of the logits does

    def step(self):
        self.forward(self.ids[:, -1:])

    def verify(self, k):
        self.forward(self.tensor([self.prompt[-1:] + self.prompt[:k]]))

    def draft_step(self):
        pass  # not timed: c is tinygrad's

    def reset(self):
        pass  # generate starts from an empty cache every time

    def compile(self):
        pass  # PyTorch runs eagerly: nothing to build

    def kernels(self):
        return None


def torch_available():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True
