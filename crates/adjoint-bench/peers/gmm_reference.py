# Independent pure-Python evaluation of ADBench's GMM objective (reference C++ semantics).
import math, sys
t = open(sys.argv[1]).read().split()
it = iter(t)
d, k, n = int(next(it)), int(next(it)), int(next(it))
f = lambda: float(next(it))
alphas = [f() for _ in range(k)]
means = [[f() for _ in range(d)] for _ in range(k)]
isz = d * (d + 1) // 2
icf = [[f() for _ in range(isz)] for _ in range(k)]
x = [[f() for _ in range(d)] for _ in range(n)]
gamma, m = f(), f()
PI = 3.14159265359
def lse(v):
    mx = max(v); return math.log(sum(math.exp(a - mx) for a in v)) + mx
def Q(c):
    q = [[0.0] * d for _ in range(d)]
    for i in range(d): q[i][i] = math.exp(icf[c][i])
    li = d
    for col in range(d):
        for row in range(col + 1, d):
            q[row][col] = icf[c][li]; li += 1
    return q
Qs = [Q(c) for c in range(k)]
total = 0.0
for xi in x:
    terms = []
    for c in range(k):
        xc = [xi[j] - means[c][j] for j in range(d)]
        qx = [sum(Qs[c][r][j] * xc[j] for j in range(d)) for r in range(d)]
        terms.append(alphas[c] + sum(icf[c][:d]) - 0.5 * sum(v * v for v in qx))
    total += lse(terms)
nn = d + m + 1
lgd = 0.25 * d * (d - 1) * math.log(PI) + sum(math.lgamma(0.5 * nn + 0.5 * (1 - j)) for j in range(1, d + 1))
C = nn * d * (math.log(gamma) - 0.5 * math.log(2)) - lgd
prior = sum(0.5 * gamma * gamma * (sum(math.exp(q) ** 2 for q in icf[c][:d]) + sum(l * l for l in icf[c][d:])) - m * sum(icf[c][:d]) for c in range(k)) - k * C
err = -n * d * 0.5 * math.log(2 * PI) + total - n * lse(alphas) + prior
print(repr(err))
