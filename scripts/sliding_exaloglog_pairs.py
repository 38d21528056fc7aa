"""What a sliding ExaLogLog would hold, beside the sliding HyperLogLog (not built).

A sliding sketch must answer any window (s, now] within its retention. For HyperLogLog a
register keeps the pairs (tick, rank) that no later pair dominates (a later rank at least as
large): the "list of future possible maxima" of Chabchoub and Hébrail. An ExaLogLog register
is a function of the set of update values seen in the window (the largest, u, and which of
the d below it), so a value k seen last at tick τ is needed for some window exactly when no
value above k + d arrives after τ (such a value would push k below every window's history),
and then its last tick must be kept. This script counts those (tick, value) pairs per register
on a stream like the reference run's (ACCURACY.md: 2,000 events a minute from 50,000 users,
ticks are seconds, one hour kept), for HyperLogLog p = 12 and ExaLogLog (t, d) = (2, 20) at
p = 9 (the same standard error, 1.6%), and prints bytes per sketch at 5 bytes a pair (a 32-bit
tick offset and a value byte, as the sliding HyperLogLog stores them).

    python3 scripts/sliding_exaloglog_pairs.py
"""
import random


def geometric_value(rng, t, cap):
    """An update value: z·2^t + s + 1 with z geometric (P(z) = 2^-(z+1)) and s uniform."""
    z = 0
    while z < cap and rng.random() < 0.5:
        z += 1
    return (z << t) + rng.randrange(1 << t) + 1


def needed_pairs(events, d):
    """(tick, value) pairs some window needs: last sightings not followed by a value > k + d."""
    last = {}
    for tick, k in events:
        last[k] = tick
    need = 0
    best_after = 0  # largest value seen after the current tick, scanning backwards
    by_tick = sorted(((tick, k) for k, tick in last.items()), reverse=True)
    for tick, k in by_tick:
        if best_after <= k + d:
            need += 1
        best_after = max(best_after, k)
    return need


def simulate(p, t, d, seed=1, users=50_000, per_minute=2_000, minutes=60):
    rng = random.Random(seed)
    m = 1 << p
    # Each user hashes to one register and one update value, fixed for the run.
    user = [(rng.randrange(m), geometric_value(rng, t, 64 - p - t)) for _ in range(users)]
    regs = [[] for _ in range(m)]
    for second in range(minutes * 60):
        for _ in range(per_minute // 60):
            i, k = user[rng.randrange(users)]
            regs[i].append((second, k))
    pairs = [needed_pairs(ev, d) for ev in regs]
    return sum(pairs) / m, sum(pairs)


if __name__ == "__main__":
    for name, p, t, d in [("HyperLogLog p=12", 12, 0, 0), ("ExaLogLog (2,20) p=9", 9, 2, 20)]:
        mean, total = simulate(p, t, d)
        print(f"{name}: {mean:.1f} pairs a register, {total} pairs, {5 * total} bytes at 5 a pair")
