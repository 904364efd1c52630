#!/usr/bin/env python3
"""ADBench GMM, BA and LSTM peers for `adjoint-bench adbench`: PyTorch (eager, vectorised), JAX (jit)
and autograd.

Usage: adbench_py.py TOOL MANIFEST [--quick] [--device cpu|cuda]

`--device cuda` runs PyTorch with its tensors on `cuda` and JAX on its GPU backend (an error if
JAX has none); every derivative is copied back to the host inside the timed call (`.cpu()`,
`np.asarray`), which also waits for the GPU, and the rows are named `pytorch-cuda`, `jax-cuda`.

MANIFEST is the JSON list written by adjoint-bench: {task, name, source, path, reference,
reference_engine} per input, where `reference` is a little-endian f64 file with the gradient (GMM,
LSTM) or the CSR values of the Jacobian (BA) of adjoint's engine `reference_engine` (the first
engine selected; the tape when only peers are). The script times objective and derivative with ADBench's
protocol, checks its derivative against the reference with ADBench's rule, and prints rows in
adjoint-bench's JSON row format on stdout, one per line as each input is measured (so a run cut
short keeps the rows before the cut).
"""
import json, math, resource, sys, time

import numpy as np

PI = 3.14159265359  # the reference implementation's value


def read_gmm(path):
    t = open(path).read().split()
    d, k, n = int(t[0]), int(t[1]), int(t[2])
    v = np.array(t[3:], dtype=np.float64)
    isz = d * (d + 1) // 2
    o = 0
    alphas = v[o:o + k]; o += k
    means = v[o:o + k * d].reshape(k, d); o += k * d
    icf = v[o:o + k * isz].reshape(k, isz); o += k * isz
    x = v[o:o + n * d].reshape(n, d); o += n * d
    return alphas, means, icf, x, v[o], v[o + 1]


def read_ba(path):
    t = open(path).read().split()
    n, m, p = int(t[0]), int(t[1]), int(t[2])
    v = np.array(t[3:], dtype=np.float64)
    cam, pt, w, feat = v[0:11], v[11:14], v[14], v[15:17]
    idx = np.arange(p)
    return dict(n=n, m=m, p=p, cams=np.tile(cam, (n, 1)), x=np.tile(pt, (m, 1)),
                w=np.full(p, w), obs=np.stack([idx % n, idx % m], 1), feats=np.tile(feat, (p, 1)))


def read_lstm(path):
    t = open(path).read().split()
    l, c, b = int(t[0]), int(t[1]), int(t[2])
    v = np.array(t[3:], dtype=np.float64)
    o = 0
    main = v[o:o + 8 * l * b].reshape(2 * l, 4 * b); o += 8 * l * b
    extra = v[o:o + 3 * b].reshape(3, b); o += 3 * b
    state = v[o:o + 2 * l * b].reshape(2 * l, b); o += 2 * l * b
    seq = v[o:o + c * b].reshape(c, b)
    return main, extra, state, seq


def make_lstm(xp, scan=None):
    """ADBench's diagonal LSTM loss over `xp`; `scan(step, carry, xs)` (JAX's lax.scan) runs the
    time loop when given, a Python loop otherwise."""
    def sigmoid(x):
        return 1 / (1 + xp.exp(-x))

    def step(main, extra, carry, chars):
        hs, cs = carry
        chr_, gold = chars
        b = chr_.shape[0]
        x = chr_ * extra[0]
        nh, nc = [], []
        for k in range(len(hs)):
            w, bias = main[2 * k], main[2 * k + 1]
            f = sigmoid(x * w[0:b] + bias[0:b])
            i = sigmoid(hs[k] * w[b:2 * b] + bias[b:2 * b])
            o = sigmoid(x * w[2 * b:3 * b] + bias[2 * b:3 * b])
            ch = xp.tanh(hs[k] * w[3 * b:] + bias[3 * b:])
            c = cs[k] * f + i * ch
            h = o * xp.tanh(c)
            nh.append(h); nc.append(c)
            x = h
        y = x * extra[1] + extra[2]
        term = xp.sum(gold * (y - xp.log(xp.sum(xp.exp(y)) + 2)))
        return (tuple(nh), tuple(nc)), term

    def loss(main, extra, state, seq):
        l = state.shape[0] // 2
        carry = (tuple(state[2 * k] for k in range(l)), tuple(state[2 * k + 1] for k in range(l)))
        if scan is not None:
            _, terms = scan(lambda cr, xs: step(main, extra, cr, xs), carry, (seq[:-1], seq[1:]))
            total = xp.sum(terms)
        else:
            total = 0.0
            for t in range(seq.shape[0] - 1):
                carry, term = step(main, extra, carry, (seq[t], seq[t + 1]))
                total = total + term
        return -total / ((seq.shape[0] - 1) * seq.shape[1])
    return loss


def log_gamma_distrib(a, d):
    return 0.25 * d * (d - 1) * math.log(PI) + sum(math.lgamma(a + 0.5 * (1 - j)) for j in range(1, d + 1))


def tri_scatter(d):
    """0/1 matrix mapping the strictly-lower-triangle parameters (column by column) to d×d."""
    s = np.zeros((d * (d - 1) // 2, d * d))
    i = 0
    for col in range(d):
        for row in range(col + 1, d):
            s[i, row * d + col] = 1.0
            i += 1
    return s


def make_gmm(xp, stop):
    """The objective over an array module `xp` (torch, jax.numpy or autograd.numpy)."""
    def lse(a, axis):
        mx = stop(xp.max(a, axis, keepdims=True))
        return xp.log(xp.sum(xp.exp(a - mx), axis)) + xp.squeeze(mx, axis)

    def objective(alphas, means, icf, x, gamma, m, scatter):
        n, d = x.shape
        k = alphas.shape[0]
        q = icf[:, :d]
        ls = xp.reshape(icf[:, d:] @ scatter, (k, d, d))
        xc = x[:, None, :] - means[None, :, :]
        lx = xp.exp(q)[None, :, :] * xc + xp.einsum('kij,nkj->nki', ls, xc)
        inner = alphas[None, :] + xp.sum(q, 1)[None, :] - 0.5 * xp.sum(lx * lx, 2)
        nn = d + m + 1
        c = nn * d * (math.log(gamma) - 0.5 * math.log(2)) - log_gamma_distrib(0.5 * nn, d)
        prior = xp.sum(0.5 * gamma * gamma * (xp.sum(xp.exp(q) ** 2, 1) + xp.sum(icf[:, d:] ** 2, 1))
                       - m * xp.sum(q, 1)) - k * c
        return (-n * d * 0.5 * math.log(2 * PI) + xp.sum(lse(inner, 1))
                - n * lse(alphas[None, :], 1)[0] + prior)
    return objective


def make_reproj(xp):
    def reproj(cam, X, w, feat):
        """Residuals for a batch (leading axis) of observations."""
        rot, C = cam[..., 0:3], cam[..., 3:6]
        xo = X - C
        sq = xp.sum(rot * rot, -1, keepdims=True)
        theta = xp.sqrt(sq)
        wv = rot / theta
        cos, sin = xp.cos(theta), xp.sin(theta)
        cross = xp.stack([wv[..., 1] * xo[..., 2] - wv[..., 2] * xo[..., 1],
                          wv[..., 2] * xo[..., 0] - wv[..., 0] * xo[..., 2],
                          wv[..., 0] * xo[..., 1] - wv[..., 1] * xo[..., 0]], -1)
        dot = xp.sum(wv * xo, -1, keepdims=True)
        xcam = xo * cos + cross * sin + wv * dot * (1 - cos)
        p = xcam[..., 0:2] / xcam[..., 2:3]
        rsq = xp.sum(p * p, -1, keepdims=True)
        L = 1 + cam[..., 9:10] * rsq + cam[..., 10:11] * rsq * rsq
        proj = p * L * cam[..., 6:7] + cam[..., 7:9]
        return w[..., None] * (proj - feat)
    return reproj


def assemble(ba, blocks):
    """CSR values in adjoint's layout: 2p rows of 15 (camera, point, weight), then p weight rows."""
    p = ba['p']
    return np.concatenate([np.asarray(blocks).reshape(p * 2 * 15), -2.0 * ba['w']])


def time_min(f, quick):
    batch, max_batches, total = (0.05, 3, 0.3) if quick else (0.5, 10, 10.0)
    reps, best = 1, float('inf')
    while True:
        t = time.perf_counter()
        for _ in range(reps):
            f()
        e = time.perf_counter() - t
        best = min(best, e / reps)
        if e >= batch or reps >= 1 << 24:
            break
        reps *= 2
    start = time.perf_counter()
    for _ in range(1, max_batches):
        if time.perf_counter() - start >= total:
            break
        t = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def agree(x, y, who):
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        return f"lengths differ: {x.size} vs {y.size}"
    e = np.abs(x - y) / np.maximum(1.0, np.abs(x) + np.abs(y))
    i = int(np.argmax(e))
    return f"ok (= {who})" if e[i] < 1e-8 else f"vs {who}: element {i}: {x[i]} vs {y[i]} (error {e[i]:.2e})"


DEVICE = 'cpu'


def tool_torch():
    import torch
    torch.set_default_dtype(torch.float64)
    if DEVICE == 'cuda' and not torch.cuda.is_available():
        raise SystemExit('adbench_py: --device cuda, but PyTorch sees no GPU')
    dev = torch.device(DEVICE)

    class NumpyNames:
        """numpy's spelling of the few reductions that differ in torch."""
        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def max(a, axis, keepdims=False):
            return torch.amax(a, axis, keepdim=keepdims)

        @staticmethod
        def sum(a, axis=None, keepdims=False):
            return torch.sum(a) if axis is None else torch.sum(a, axis, keepdim=keepdims)

    tnp = NumpyNames()
    gmm = make_gmm(tnp, lambda a: a.detach())
    reproj = make_reproj(tnp)

    def gmm_fns(inp):
        alphas, means, icf, x, gamma, m = inp
        T = lambda a: torch.tensor(a, device=dev)
        xs, sc = T(x), T(tri_scatter(x.shape[1]))
        params = [T(alphas), T(means), T(icf)]
        obj = lambda: gmm(*params, xs, gamma, m, sc).item()

        def grad():
            ps = [p.clone().requires_grad_() for p in params]
            gmm(*ps, xs, gamma, m, sc).backward()
            return np.concatenate([p.grad.cpu().numpy().ravel() for p in ps])
        return obj, grad

    def ba_fns(ba):
        T = lambda a: torch.tensor(a, device=dev)
        cams, X, w, feats = T(ba['cams'][ba['obs'][:, 0]]), T(ba['x'][ba['obs'][:, 1]]), T(ba['w']), T(ba['feats'])
        obj = lambda: (reproj(cams, X, w, feats), 1 - w * w)
        f = lambda z: reproj(z[0:11], z[11:14], z[14], z[15:17])
        jac = torch.func.vmap(torch.func.jacrev(f))

        def jacobian():
            z = torch.cat([cams, X, w[:, None], feats], 1)
            return assemble(ba, jac(z)[:, :, :15].cpu().numpy())
        return obj, jacobian

    lstm = make_lstm(torch)

    def lstm_fns(inp):
        main, extra, state, seq = [torch.tensor(a, device=dev) for a in inp]
        obj = lambda: lstm(main, extra, state, seq).item()

        def grad():
            m, e = main.clone().requires_grad_(), extra.clone().requires_grad_()
            lstm(m, e, state, seq).backward()
            return np.concatenate([m.grad.cpu().numpy().ravel(), e.grad.cpu().numpy().ravel()])
        return obj, grad
    return gmm_fns, ba_fns, lstm_fns


def tool_jax():
    import jax
    jax.config.update('jax_enable_x64', True)
    if DEVICE == 'cpu':
        jax.config.update('jax_platforms', 'cpu')
    elif jax.default_backend() != 'gpu':
        raise SystemExit(f'adbench_py: --device cuda, but JAX runs on {jax.default_backend()}')
    import jax.numpy as jnp
    gmm = make_gmm(jnp, jax.lax.stop_gradient)
    reproj = make_reproj(jnp)

    def gmm_fns(inp):
        alphas, means, icf, x, gamma, m = inp
        sc = jnp.asarray(tri_scatter(x.shape[1]))
        xs = jnp.asarray(x)
        params = (jnp.asarray(alphas), jnp.asarray(means), jnp.asarray(icf))
        # Every array is an argument of the jitted function: a closed-over array is a constant
        # to XLA, which may then compute (parts of) the answer at compile time.
        f = jax.jit(lambda a, mu, q, xs, sc: gmm(a, mu, q, xs, gamma, m, sc))
        g = jax.jit(jax.grad(lambda a, mu, q, xs, sc: gmm(a, mu, q, xs, gamma, m, sc),
                             argnums=(0, 1, 2)))
        obj = lambda: float(f(*params, xs, sc))
        grad = lambda: np.concatenate([np.asarray(v).ravel() for v in g(*params, xs, sc)])
        return obj, grad

    def ba_fns(ba):
        cams = jnp.asarray(ba['cams'][ba['obs'][:, 0]]); X = jnp.asarray(ba['x'][ba['obs'][:, 1]])
        w = jnp.asarray(ba['w']); feats = jnp.asarray(ba['feats'])
        # Inputs as arguments: the zero-argument version was constant-folded by XLA (0.05 ms
        # instead of ~3.4 ms on ba1), which made JAX's BA ratios meaningless.
        fobj = jax.jit(lambda cams, X, w, feats: (reproj(cams, X, w, feats), 1 - w * w))
        obj = lambda: jax.block_until_ready(fobj(cams, X, w, feats))
        f = lambda z: reproj(z[0:11], z[11:14], z[14], z[15:17])
        jac = jax.jit(jax.vmap(jax.jacrev(f)))
        z = jnp.concatenate([cams, X, w[:, None], feats], 1)
        return obj, lambda: assemble(ba, np.asarray(jac(z))[:, :, :15])

    lstm = make_lstm(jnp, jax.lax.scan)

    def lstm_fns(inp):
        main, extra, state, seq = [jnp.asarray(a) for a in inp]
        f = jax.jit(lstm)
        g = jax.jit(jax.grad(lstm, argnums=(0, 1)))
        obj = lambda: float(f(main, extra, state, seq))
        grad = lambda: np.concatenate([np.asarray(v).ravel() for v in g(main, extra, state, seq)])
        return obj, grad
    return gmm_fns, ba_fns, lstm_fns


def tool_autograd():
    import autograd
    import autograd.numpy as anp
    gmm = make_gmm(anp, lambda a: a)
    reproj = make_reproj(anp)

    def gmm_fns(inp):
        alphas, means, icf, x, gamma, m = inp
        sc = tri_scatter(x.shape[1])
        obj = lambda: float(gmm(alphas, means, icf, x, gamma, m, sc))
        g = autograd.grad(lambda a, mu, q: gmm(a, mu, q, x, gamma, m, sc), argnum=[0, 1, 2])
        return obj, lambda: np.concatenate([np.asarray(v).ravel() for v in g(alphas, means, icf)])

    def ba_fns(ba):
        cams, X, w, feats = ba['cams'][ba['obs'][:, 0]], ba['x'][ba['obs'][:, 1]], ba['w'], ba['feats']
        obj = lambda: (reproj(cams, X, w, feats), 1 - w * w)
        jac = autograd.jacobian(lambda z: reproj(z[0:11], z[11:14], z[14], z[15:17]))

        def jacobian():
            z = np.concatenate([cams, X, w[:, None], feats], 1)
            return assemble(ba, np.stack([jac(zi)[:, :15] for zi in z]))
        return obj, jacobian

    lstm = make_lstm(anp)

    def lstm_fns(inp):
        main, extra, state, seq = inp
        obj = lambda: float(lstm(main, extra, state, seq))
        g = autograd.grad(lambda m, e: lstm(m, e, state, seq), argnum=[0, 1])
        return obj, lambda: np.concatenate([np.asarray(v).ravel() for v in g(main, extra)])
    return gmm_fns, ba_fns, lstm_fns


def main():
    global DEVICE
    tool, manifest = sys.argv[1], json.load(open(sys.argv[2]))
    quick = '--quick' in sys.argv
    if '--device' in sys.argv:
        DEVICE = sys.argv[sys.argv.index('--device') + 1]
        if DEVICE not in ('cpu', 'cuda'):
            raise SystemExit(f'adbench_py: --device cpu or cuda, not {DEVICE}')
        if DEVICE == 'cuda' and tool == 'autograd':
            raise SystemExit('adbench_py: autograd has no GPU')
    name = tool if DEVICE == 'cpu' else f'{tool}-{DEVICE}'
    gmm_fns, ba_fns, lstm_fns = {'pytorch': tool_torch, 'jax': tool_jax, 'autograd': tool_autograd}[tool]()
    # One JSON row per line, written as soon as it is measured: a run cut short keeps the rows
    # before the cut (the bench rewrites its table after each).
    emit = lambda row: print(json.dumps(row), flush=True)
    for item in manifest:
        if tool == 'autograd' and item['task'] == 'ba':
            # autograd has no vmap: a per-observation Python loop takes minutes per Jacobian.
            emit(dict(task='ba', input=item['name'], source=item['source'], params=0,
                             engine=name, objective_s=0.0, derivative_s=0.0, ratio=0.0, peak_bytes=0,
                             check='skipped: per-observation Python Jacobian takes minutes'))
            continue
        if item['task'] == 'gmm':
            inp = read_gmm(item['path'])
            obj, der = gmm_fns(inp)
            params = inp[0].size + inp[1].size + inp[2].size
        elif item['task'] == 'lstm':
            inp = read_lstm(item['path'])
            obj, der = lstm_fns(inp)
            params = inp[0].size + inp[1].size
        else:
            ba = read_ba(item['path'])
            obj, der = ba_fns(ba)
            params = 11 * ba['n'] + 3 * ba['m'] + ba['p']
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = der()
        check = agree(result, np.fromfile(item['reference'], dtype='<f8'), item['reference_engine'])
        # What this peer computed, beside the reference, so agreement can be checked from files.
        ref = item['reference']
        out = ref[:-len('.reference.f64')] if ref.endswith('.reference.f64') else ref
        np.asarray(result, dtype='<f8').tofile(f"{out}.{name}.f64")
        ot = time_min(obj, quick)
        dt = time_min(der, quick)
        peak = max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
        emit(dict(task=item['task'], input=item['name'], source=item['source'], params=params,
                  engine=name, objective_s=ot, derivative_s=dt, ratio=dt / ot,
                  peak_bytes=peak, check=check))
        print(f"  {name} {item['task']} {item['name']}: {check}", file=sys.stderr)


if __name__ == '__main__':
    main()
