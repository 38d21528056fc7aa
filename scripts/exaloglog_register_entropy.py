"""How many bits an ExaLogLog register carries, against the 6 + t + d it is stored in.

With n items Poisson-spread over the registers (λ = n/m each), update value k is present in
a register independently with probability q_k = 1 − exp(−λ·ρ(k)), ρ(k) = 2^−(t + 1 +
⌊(k−1)/2^t⌋). Given the largest present value u, the values below it stay independent, so a
register's entropy is H(u) + Σ_δ E[h(q_{u−δ})] over the d history bits (h the binary entropy).
Averaged over a doubling of λ (the registers' distribution repeats with it), this is what an
entropy coder at rest could reach; multiplied into the memory-variance products it says how
far ExaLogLog stored at its entropy would be from DataSketches' CPC.

    python3 scripts/exaloglog_register_entropy.py
"""
import math


def h(q):
    return 0.0 if q <= 0.0 or q >= 1.0 else -(q * math.log2(q) + (1 - q) * math.log2(1 - q))


def register_entropy(t, d, lam, kmax=300):
    rho = [0.0] + [2.0 ** -(t + 1 + (k - 1) // (1 << t)) for k in range(1, kmax + 1)]
    q = [0.0] + [1 - math.exp(-lam * r) for r in rho[1:]]
    # P(u = k) = q_k · Π_{j>k} (1 − q_j); P(u = 0) = Π_j (1 − q_j).
    none_above = [1.0] * (kmax + 2)
    for k in range(kmax, -1, -1):
        none_above[k] = none_above[k + 1] * (1 - q[k + 1]) if k < kmax else 1.0
    pu = [none_above[0]] + [q[k] * none_above[k] for k in range(1, kmax + 1)]
    hu = -sum(p * math.log2(p) for p in pu if p > 0)
    hist = sum(pu[u] * sum(h(q[u - delta]) for delta in range(1, d + 1) if u - delta >= 1)
               for u in range(1, kmax + 1))
    return hu + hist


if __name__ == "__main__":
    for t, d, mvp_ml, mvp_mart in [(2, 20, 3.6732, 2.8267), (2, 24, 3.7814, 3.0016),
                                   (1, 9, 3.9025, 3.0684), (0, 0, 6.4485, 4.1589)]:
        steps = 32
        bits = sum(register_entropy(t, d, 2 ** (12 + i / steps)) for i in range(steps)) / steps
        stored = 6 + t + d
        print(f"(t, d) = ({t}, {d}): {bits:.2f} bits of {stored} stored; MVP at the entropy "
              f"{mvp_ml * bits / stored:.2f} (ML), {mvp_mart * bits / stored:.2f} (martingale)")
