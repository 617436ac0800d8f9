"""specmini: speculative sampling in under 100 lines, to read in one sitting."""

from specmini.analysis import acceptance_rate, expected_tokens, speedup, speedup_from_tokens
from specmini.decode import Generation, Round, autoregressive, generate
from specmini.sampling import probabilities, residual, sample, speculative_accept
