# The causal forward's last wave in a model: CTAs of known length dispatched in a given order, each
# to the first free slot (the hardware's and the persistent walk's greedy schedule), against the
# ideal (total work / slots). Orders: head by head, longest first within each head (groups of 1),
# and longest first across groups of G heads (docs/experiments/2026-12-06-s45-tile-order-groups
# .patch). A query tile of 128 rows walks ceil(128 (i + 1) / block_n) key tiles plus a fixed cost;
# an SM whose other slot is idle runs its CTA `alone` times as fast. Prints the makespan over the
# ideal per group size.
#   python3 bench/tile_order_sim.py            (docs/perf-notes.md §57 has its output)
import math


def makespan(lengths, sms, per_sm, alone, fixed):
    pending = iter(lengths)
    sm = [[] for _ in range(sms)]
    for s in range(sms):
        for _ in range(per_sm):
            w = next(pending, None)
            if w is not None:
                sm[s].append(w + fixed)
    t = 0.0
    while True:
        rates = [1.0 if len(r) == per_sm else alone for r in sm]
        steps = [min(r) / rate for r, rate in zip(sm, rates) if r]
        if not steps:
            return t
        dt = min(steps)
        t += dt
        for s, rate in enumerate(rates):
            left = [w - dt * rate for w in sm[s]]
            sm[s] = [w for w in left if w > 1e-9]
            for _ in range(len(left) - len(sm[s])):
                w = next(pending, None)
                if w is not None:
                    sm[s].append(w + fixed)


def ordered(tiles, units, group):
    out = []
    for first in range(0, units, group):
        here = min(group, units - first)
        for rank in range(len(tiles)):
            out += [tiles[-1 - rank]] * here
    return out


CASES = [  # name, seq, heads x batches, key tile, SMs, CTAs per SM, speed alone
    ("d=64 16k causal, 128 x 96, two CTAs per SM", 16384, 32, 96, 132, 2, 1.5),
    ("d=64 4k causal (batch 4), 128 x 96", 4096, 128, 96, 132, 2, 1.5),
    ("d=128 16k causal, persistent 128 x 128", 16384, 16, 128, 132, 1, 1.0),
    ("d=128 4k causal (batch 4), persistent", 4096, 64, 128, 132, 1, 1.0),
]
for name, seq, units, block_n, sms, per_sm, alone in CASES:
    tiles = [math.ceil(128 * (i + 1) / block_n) for i in range(seq // 128)]
    fixed = 2
    ideal = (sum(tiles) + fixed * len(tiles)) * units / (sms * per_sm)
    row = [f"G={g}: {makespan(ordered(tiles, units, g), sms, per_sm, alone, fixed) / ideal:.3f}"
           for g in (1, 2, 4, 8, 16, units)]
    print(f"{name}: " + ", ".join(row))
