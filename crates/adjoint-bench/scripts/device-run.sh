#!/usr/bin/env bash
# One device call (see device-prepare.sh): the GPU tests, ADBench GMM on the GPU against JAX and
# BA against JAX and PyTorch on the same GPU (#17), and the 16-core rows of #16. Each stage has its own
# time limit, cut to what is left of $LIMIT s (570 by default), and appends to $OUT/log.txt;
# the bench tables go to $OUT/*.md. A stage that runs out of time is cut and the next one still
# runs. Stages run in this file's order, whatever the order of the arguments (default: tests
# gmm gmm-large ba ba-large scaling particles). `gmm-grid-1k` and `gmm-grid-rest` run ADBench's
# whole GMM grid, 44 inputs, in two calls (`gmm-grid-10k-d2`: the 6 inputs of it that have no
# JAX row yet), `ba-large-peers` adds JAX and PyTorch to BA 11-20 (`ba-19-20-peers`: the two it did not reach), `sweep` runs BA ba1 and GMM
# 1k d10 K25 at 1-16 threads (#16), `matmul-ab` the GPU's two matrix-product kernels on GMM
# d64/d128 (#17). E.g. `LIMIT=555 device-run.sh tests gmm-grid-10k-d2`, then
# `device-run.sh ba-large-peers` in a second call.
OUT=${OUT:-$(mktemp -d)} # the device tool sets $OUT
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
export ADJOINT_PEERS_PYTHON=${ADJOINT_PEERS_PYTHON:-python3} PYTHONUNBUFFERED=1
STAGES=${*:-tests gmm gmm-large ba ba-large scaling particles}
want() { [[ " $STAGES " == *" $1 "* ]]; }
stage() { echo; echo "== $1 ($(date -u +%T))"; }
# Every stage's limit, cut to what is left of $LIMIT s, so the call ends inside its 600 s.
START=$(date +%s) LIMIT=${LIMIT:-570}
lim() { local r=$((LIMIT - $(date +%s) + START)); echo $((r < $1 ? (r > 1 ? r : 1) : $1)); }
B=".dev/adjoint-bench adbench --quick --data .dev/adbench --full-grid"
T=$(mktemp -d)
date -u; nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

want tests && {
stage "GPU tests (every code-generation case, every prelude rule at special points, then whole programs against the CPU backend)"
# (120 s was too short on a fresh machine on 2026-11-26, 180 s on 2026-11-27: NVRTC and the
# driver compile every module cold; a second run took 8 s; the filter `on_the_gpu` also runs
# `prelude_rules_on_the_gpu`)
ADJOINT_CUDA_TESTS=1 timeout $(lim 240) .dev/array-tests on_the_gpu programs_on_the_gpu --nocapture --test-threads 1 | grep -v "^$"
}

want gmm && {
stage "GMM on the GPU against JAX (1k d <= 32, 10k d <= 10)"
G='1k/gmm_d2_K5$,1k/gmm_d2_K200$,1k/gmm_d10_K5$,1k/gmm_d10_K25$,1k/gmm_d10_K200$,1k/gmm_d20_K25$,1k/gmm_d32_K25$,10k/gmm_d2_K5$,10k/gmm_d2_K200$,10k/gmm_d10_K25$,10k/gmm_d10_K200$'
timeout $(lim 120) $B --threads 16 --peer-device cuda --filter "$G" --engines array-cuda,jax --out $T/g1
cp $T/g1/adbench.md "$OUT/gmm.md"
}

# ADBench's GMM grid on the GPU against JAX, one process per (n, d) (6 inputs) or per input
# (d >= 64): a cut process loses only its own unmeasured rows (the bench writes adjoint's rows
# before the peers and rewrites its table after each peer row). On 2026-11-27 a (n, d) process
# took 60-120 s (NVRTC and JAX compiling 6 programs each, cold) and d >= 64 ~20 s per input:
# the whole grid is ~13 minutes, two calls: `gmm-grid-1k` (1k, d <= 32) and `gmm-grid-rest`.
grid() {
    for g in "$@"; do
        o=$T/grid-${g//[\/\$]/-}
        timeout $(lim 130) $B --threads 16 --peer-device cuda --filter "$g" --engines array-cuda,jax --out $o
        grep -h '^| gmm' $o/adbench.md >> "$OUT/gmm-grid.md"
    done
}
want gmm-grid-1k && {
stage "ADBench's GMM grid, 1k points, d <= 32, on the GPU against JAX"
grid 1k/gmm_d2_ 1k/gmm_d10_ 1k/gmm_d20_ 1k/gmm_d32_
}
want gmm-grid-10k-d2 && {
stage "ADBench's GMM grid, 10k points, d = 2 (the inputs not yet measured against JAX on 2026-11-27)"
grid 10k/gmm_d2_
}
want gmm-grid-rest && {
stage "ADBench's GMM grid, 10k points and d >= 64, on the GPU against JAX"
grid 10k/gmm_d2_ 10k/gmm_d10_
grid 1k/gmm_d64_K5\$ 1k/gmm_d64_K10\$ 1k/gmm_d64_K25\$ 1k/gmm_d64_K50\$ 1k/gmm_d64_K100\$ \
    1k/gmm_d128_K5\$ 1k/gmm_d128_K10\$ 1k/gmm_d128_K25\$
}

want gmm-large && {
stage "GMM d64, d128 on the GPU against JAX (one process per input: a cut input keeps the rows before it)"
# The first run of a d = 128 program spends ~30 s in the driver's PTX compiler (cached after).
for f in d64_K5 d64_K25 d128_K5 d128_K25; do
    timeout $(lim 75) $B --threads 16 --peer-device cuda --filter "1k/gmm_$f\$" --engines array-cuda,jax --out $T/g$f
    grep -h '^| gmm' $T/g$f/adbench.md >> "$OUT/gmm-d64.md"
done
}

want ba && {
stage "BA 1-10 on the GPU against JAX and PyTorch"
timeout $(lim 100) $B --threads 16 --peer-device cuda --filter 'ba1$,ba2$,ba3$,ba4$,ba5$,ba6$,ba7$,ba8$,ba9$,ba10$' --engines array-cuda,jax,pytorch --out $T/b1
cp $T/b1/adbench.md "$OUT/ba.md"
}

for peers in ba-large ba-large-peers; do
want $peers || continue
[ $peers = ba-large ] && E=array-cuda || E=array-cuda,pytorch,jax
stage "BA 11-20 on the GPU, $E (one process per input; ba20 alone takes ~40 s and 17 GiB of host memory)"
for n in 11 12 13 14 15 16 17 18 19 20; do
    timeout $(lim 90) $B --threads 16 --peer-device cuda --filter "ba$n\$" --engines $E --out $T/b$n
    grep -h '^| ba' $T/b$n/adbench.md >> "$OUT/$peers.md"
done
done

want ba-19-20-peers && {
stage "BA 19 and 20 on the GPU against PyTorch and JAX (ba-large-peers' 460 s cut them on 2026-11-27)"
for n in 19 20; do
    timeout $(lim 240) $B --threads 16 --peer-device cuda --filter "ba$n\$" --engines array-cuda,pytorch,jax --out $T/c$n
    grep -h '^| ba' $T/c$n/adbench.md >> "$OUT/ba-19-20-peers.md"
done
}

want scaling && {
stage "16 threads against 1 (#16): BA 1-3, GMM 1k and 10k d10 K25"
timeout $(lim 70) .dev/adjoint-bench adbench --quick --data .dev/adbench --full-grid --filter 'ba1$,ba2$,ba3$,1k/gmm_d10_K25$,10k/gmm_d10_K25$' --threads 1,16 --engines tape,reversible,ssa,array --out $T/s
cp $T/s/adbench.md "$OUT/scaling.md"
}

want sweep && {
stage "1, 2, 4, 8 and 16 threads (#16): where the scaling of BA ba1 and GMM 1k d10 K25 flattens"
timeout $(lim 90) .dev/adjoint-bench adbench --quick --data .dev/adbench --filter 'ba1$,1k/gmm_d10_K25$' --threads 1,2,4,8,16 --engines tape,reversible --out $T/w
cp $T/w/adbench.md "$OUT/sweep.md"
}

want matmul-ab && {
stage "GMM d64/d128 on the GPU with the simple matrix product (ADJOINT_CUDA_MATMUL=simple) against the tiled one"
for m in simple tiled; do
    ADJOINT_CUDA_MATMUL=$m timeout $(lim 60) $B --threads 16 --filter '1k/gmm_d64_K25$,1k/gmm_d64_K100$,1k/gmm_d128_K25$' --engines array-cuda --out $T/m$m
    sed "s/^| gmm/| $m gmm/" $T/m$m/adbench.md | grep -h "^| $m" >> "$OUT/matmul-ab.md"
done
}

want particles && {
stage "particles (#16)"
timeout $(lim 40) .dev/adjoint-bench --quick --filter particles --out $T/p
cp $T/p/bench.md "$OUT/particles.md"
}
date -u
