"""One owner's network terms in the P3 search (:mod:`heuristics.serving.search`), per crossing
network: what it sends and receives along a fixed owner sequence, and their exact values or
lower bounds once its and its partners' GPU types are known or not (problems.md §3.1 "Network
model": a crossing takes the network of its two endpoints' GPU types)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class NetTerms:
    """One owner's network terms per crossing network n (``[N, MB]`` ticks per token): the
    boundary transfers it sends to the next owner (path duration, NIC-out busy), the token ids
    it returns to the embedding owner (when it owns the LM head), the boundaries it receives
    from the previous owner and the token ids it receives (embedding owner) — NIC-in busy at
    its own b̂. Which network a crossing takes depends on both endpoints' GPU types
    (problems.md §3.1 "Network model")."""

    send_next: np.ndarray
    out_next: np.ndarray
    send_tok: np.ndarray
    out_tok: np.ndarray
    in_prev: np.ndarray
    in_tok: np.ndarray

    def exact(self, cross: np.ndarray, g, g_next, g_prev, g_first, g_last, mb
              ) -> tuple[np.ndarray, np.ndarray]:
        """(path transfer durations sent, busier NIC direction) with the owner on GPU type
        ``g`` at microbatch index ``mb`` and its partners on the given types (scalars or
        arrays, vectorised)."""
        nx, tf, pv, tl = cross[g, g_next], cross[g, g_first], cross[g_prev, g], cross[g_last, g]
        send = self.send_next[nx, mb] + self.send_tok[tf, mb]
        out = self.out_next[nx, mb] + self.out_tok[tf, mb]
        inn = self.in_prev[pv, mb] + self.in_tok[tl, mb]
        return send, np.maximum(out, inn)

    def optimistic(self, cross: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """([G, MB] send, [G, MB] busier NIC direction): lower bounds over every partner GPU
        type for an owner on each GPU type (exact with one network)."""
        g = len(cross)
        if len(self.send_next) == 1:  # one network: exact, the same for every GPU type
            send = self.send_next[0] + self.send_tok[0]
            busier = np.maximum(self.out_next[0] + self.out_tok[0], self.in_prev[0] + self.in_tok[0])
            if g == 1:
                return send[None], busier[None]
            return (np.broadcast_to(send, (g, len(send))),
                    np.broadcast_to(busier, (g, len(busier))))

        def low(tab: np.ndarray, nets: np.ndarray) -> np.ndarray:  # [G, P] -> [G, MB]
            return tab[nets].min(axis=1)
        row, col = cross, cross.T   # row[g, p]: g sends to p; col[g, p]: p sends to g
        send = low(self.send_next, row) + low(self.send_tok, row)
        out = low(self.out_next, row) + low(self.out_tok, row)
        inn = low(self.in_prev, col) + low(self.in_tok, col)
        return send, np.maximum(out, inn)
