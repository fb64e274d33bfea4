"""Synthetic traces in the Mooncake shape for the kvroute tests: conversations whose turns each extend
the previous turn's blocks, all behind one shared system-prompt block (block 0), as the conversation
trace is."""

from __future__ import annotations

import random

from modelplane.kvroute.trace import BLOCK_TOKENS, TraceRequest


def conversations(requests: int, *, conversations: int, seed: int = 7, rate_per_s: float = 20.0,
                  blocks_per_turn: int = 3, output_tokens: int = 50, shared_root: bool = True) -> list[TraceRequest]:
    rng = random.Random(seed)
    next_block = 1
    histories: list[list[int]] = []
    out: list[TraceRequest] = []
    t = 0.0
    for i in range(requests):
        t += rng.expovariate(rate_per_s)
        if len(histories) < conversations and (not histories or rng.random() < 0.5):
            histories.append([0] if shared_root else [])
        h = histories[rng.randrange(len(histories))]
        h.extend(range(next_block, next_block + blocks_per_turn))
        next_block += blocks_per_turn
        out.append(TraceRequest(i, t, len(h) * BLOCK_TOKENS, output_tokens, tuple(h)))
        if len(h) > 60:
            h[1 if shared_root else 0:] = []
    return out
