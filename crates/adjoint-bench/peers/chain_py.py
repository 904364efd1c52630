#!/usr/bin/env python3
"""The array engine's map-chain benchmark in JAX (jit) and PyTorch, for `adjoint-bench`.

Usage: chain_py.py TOOL N [--quick]

The chain is five element-wise maps, v*1.5 + 0.25, v*v, v - 0.5, max(v, 0.1), v*3 - 1, over
x[i] = sin(i * 1e-7), i < N, in f64, as `adjoint_bench::arraybench` computes it. Prints a JSON
list of [what, median seconds] pairs: the objective and the gradient of the sum, results on
the host (as the Rust side returns them).
"""
import json, sys, time

import numpy as np


def chain(xp, x):
    v = x * 1.5 + 0.25
    v = v * v
    v = v - 0.5
    v = xp.maximum(v, 0.1)
    return v * 3.0 - 1.0


def median_time(f, quick):
    f()
    budget = 0.3 if quick else 2.0
    samples, start = [], time.perf_counter()
    while len(samples) < 3 or time.perf_counter() - start < budget:
        t = time.perf_counter()
        f()
        samples.append(time.perf_counter() - t)
    return float(np.median(samples))


def main():
    tool, n = sys.argv[1], int(sys.argv[2])
    quick = '--quick' in sys.argv
    x = np.sin(np.arange(n, dtype=np.float64) * 1e-7)
    rows = []
    if tool == 'jax':
        import jax
        jax.config.update('jax_enable_x64', True)
        import jax.numpy as jnp
        xs = jnp.asarray(x)
        f = jax.jit(lambda x: chain(jnp, x))
        g = jax.jit(jax.grad(lambda x: jnp.sum(chain(jnp, x))))
        rows.append(['JAX jit (objective)', median_time(lambda: np.asarray(f(xs)), quick)])
        rows.append(['JAX jit gradient of the sum', median_time(lambda: np.asarray(g(xs)), quick)])
    elif tool == 'pytorch':
        try:
            import torch
        except ImportError:
            print("  map-chain peer pytorch: torch is not installed in peers/.venv; skipped",
                  file=sys.stderr)
            print('[]')
            return
        xs = torch.tensor(x)
        rows.append(['PyTorch eager (objective)', median_time(lambda: chain(torch, xs).numpy(), quick)])

        def grad():
            xg = xs.clone().requires_grad_()
            torch.sum(chain(torch, xg)).backward()
            return xg.grad.numpy()
        rows.append(['PyTorch eager gradient of the sum', median_time(grad, quick)])
    else:
        raise SystemExit(f"unknown tool {tool}")
    json.dump(rows, sys.stdout)


if __name__ == '__main__':
    main()
