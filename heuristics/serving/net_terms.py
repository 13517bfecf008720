"""One owner's network terms in the P3 search (:mod:`heuristics.serving.search`), per crossing
network: what it sends and receives along a fixed owner sequence, and their exact values or
lower bounds once its and its partners' GPU types are known or not (problems.md §3.1 "Network
model": a crossing takes the network of its two endpoints' GPU types), and the redistribution
of its crossings between different TP degrees (:mod:`opt.serving.crossing`)."""

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
    (problems.md §3.1 "Network model"). ``reshard_out`` / ``reshard_in`` (``[C, MB]`` ticks
    per token, None: no crossing redistributes) are the all-gathers of its sent boundaries
    and the scatters of its received ones, charged when the partner's TP degree differs."""

    send_next: np.ndarray
    out_next: np.ndarray
    send_tok: np.ndarray
    out_tok: np.ndarray
    in_prev: np.ndarray
    in_tok: np.ndarray
    reshard_out: np.ndarray | None = None
    reshard_in: np.ndarray | None = None

    def exact(self, cross: np.ndarray, g, g_next, g_prev, g_first, g_last, mb,
              reshard: tuple = (0, 0)) -> tuple[np.ndarray, np.ndarray]:
        """(path transfer durations sent, busier NIC direction) with the owner on GPU type
        ``g`` at microbatch index ``mb`` and its partners on the given types (scalars or
        arrays, vectorised); ``reshard``: its redistribution (out, in) ticks
        (:meth:`reshard_ticks`)."""
        nx, tf, pv, tl = cross[g, g_next], cross[g, g_first], cross[g_prev, g], cross[g_last, g]
        send = self.send_next[nx, mb] + self.send_tok[tf, mb] + reshard[0]
        out = self.out_next[nx, mb] + self.out_tok[tf, mb] + reshard[0]
        inn = self.in_prev[pv, mb] + self.in_tok[tl, mb] + reshard[1]
        return send, np.maximum(out, inn)

    def reshard_ticks(self, differ: np.ndarray, c, c_next, c_prev, mb) -> tuple:
        """(out, in) redistribution ticks per token of the owner on configuration ``c`` at
        microbatch index ``mb`` with its receiver on ``c_next`` and its sender on ``c_prev``
        (``differ`` = ``ServingInstance.config_reshard``; scalars or arrays, vectorised)."""
        if self.reshard_out is None or self.reshard_in is None:
            return 0, 0
        return (self.reshard_out[c, mb] * differ[c, c_next],
                self.reshard_in[c, mb] * differ[c_prev, c])

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
