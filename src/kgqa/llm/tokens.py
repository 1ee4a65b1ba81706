"""A deterministic token-count approximation for backends that report no usage (the scripted model, odd servers).

It is NOT a real tokenizer: words count one token per 4 characters (rounded up), each punctuation mark one token, and each
message adds 4 tokens of chat framing. Counts are stable across runs and machines, so accounting tests can be exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

_PIECE_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
MESSAGE_OVERHEAD = 4


def approx_tokens(text: str) -> int:
    """Approximate token count of ``text`` (see the module docstring for the rule)."""
    total = 0
    for piece in _PIECE_RE.findall(text):
        total += (len(piece) + 3) // 4 if piece[0].isalnum() or piece[0] == "_" else 1
    return total


def approx_prompt_tokens(messages: Iterable[Mapping[str, str]]) -> int:
    """Approximate prompt tokens of chat ``messages`` (content plus a fixed framing cost per message)."""
    return sum(approx_tokens(m.get("content", "")) + MESSAGE_OVERHEAD for m in messages)
