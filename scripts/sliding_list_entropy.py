"""How much information the sliding HyperLogLog's pair lists hold at the reference scenario.

Simulates the scenario of the benchmark diary (docs/history/benchmarks-2026-12-04.md,
"Windowed distinct counts"): 50,000 users, each with a
fixed register index and rank (as a hash would give them), 34 events a second for 7,200 s, p = 12,
lists kept as the sliding HyperLogLog keeps them (ticks increasing, ranks strictly decreasing),
then cut to the last 3,600 s. Prints the pairs and the empirical entropy (Miller-Madow corrected)
of the list lengths, of each pair's age by its position from the newest, and of its rank step: an
estimate of the bytes any exact-edge encoding of the lists needs.

    python3 scripts/sliding_list_entropy.py
"""
import random, math, collections
random.seed(7)
P=12; M=1<<P; RET=3600; RATE=34; USERS=50000
# per-user fixed hash: index and rank
idx=[random.getrandbits(P) for _ in range(USERS)]
def geo():
    r=1
    while random.getrandbits(1)==0 and r<64-P: r+=1
    return r
rank=[geo() for _ in range(USERS)]
lists=[[] for _ in range(M)]
T=7200
for t in range(T):
    for _ in range(RATE):
        u=random.randrange(USERS)
        i,r=idx[u],rank[u]
        L=lists[i]
        while L and L[-1][1]<=r: L.pop()
        if L and L[-1][0]==t: continue
        L.append((t,r))
now=T-1
for i in range(M):
    lists[i]=[(t,r) for (t,r) in lists[i] if t>now-RET]
pairs=sum(len(L) for L in lists)
print("pairs",pairs,"per reg",pairs/M)
def H(c):
    n=sum(c.values()); h=-sum(v/n*math.log2(v/n) for v in c.values())
    return h+(len(c)-1)/(2*n*math.log(2))  # Miller-Madow
lens=collections.Counter(len(L) for L in lists)
hl=H(lens)
# ages by position from newest, binned to 1 s; conditional on position
byp=collections.defaultdict(collections.Counter); rk=collections.defaultdict(collections.Counter)
for L in lists:
    for k,(t,r) in enumerate(reversed(L)):
        byp[k][now-t]+=1
        prev = L[len(L)-k] [1] if k>0 else 0
        rk[k][r-prev]+=1
bits=hl*M
for k in byp:
    n=sum(byp[k].values())
    bits+=n*H(byp[k]) + n*H(rk[k])
print("length entropy/reg %.2f bits"%hl)
for k in sorted(byp):
    print(k, sum(byp[k].values()), "age H %.2f"%H(byp[k]), "rank-delta H %.2f"%H(rk[k]))
print("estimated bits total %.0f = %.0f bytes = %.2fx of 4240"%(bits,bits/8,bits/8/4240))
