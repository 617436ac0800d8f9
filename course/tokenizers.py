"""Text to tokens and back: the offline pair's bytes, and real GPT-2's BPE (tiktoken)."""

import os
import tempfile


class ByteTokenizer:
    """The offline pair's tokens: the bytes of UTF-8 text (vocab 256)."""

    n_vocab = 256

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, tokens):
        return bytes(tokens).decode("utf-8", errors="replace")


def gpt2_tokenizer():
    """tiktoken's `gpt2` BPE; it downloads its vocabulary files once and caches them."""
    import tiktoken

    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as e:  # tiktoken raises requests' errors or its own, depending on the version
        default = os.path.join(tempfile.gettempdir(), "data-gym-cache")
        cache = (
            os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or default
        )
        raise ConnectionError(
            "could not get tiktoken's gpt2 encoding (it downloads vocab.bpe and encoder.json from "
            f"openaipublic.blob.core.windows.net once, then caches them in {cache}): {e}"
        ) from e
