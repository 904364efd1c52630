#!/usr/bin/env bash
# Prepare a run on a lent `device` machine (one GPU, 16 cores, no Rust toolchain, no network):
# build here, copy the stripped binaries and ADBench's input files into `.dev/` (kept out of
# git through `.git/info/exclude`), then run `device-run.sh` there:
#
#   crates/adjoint-bench/scripts/device-prepare.sh      # here (about 4 minutes on 2 cores)
#   device run: command `bash crates/adjoint-bench/scripts/device-run.sh`, carry [".dev"],
#               timeout_s 600                            # there; results come back from $OUT
#
# Sizes: the two binaries and ADBench's GMM and BA files are ~50 MiB (the carry limit is 64).
set -euo pipefail
cd "$(dirname "$0")/../../.."
crates/adjoint-array/scripts/gpu-tests.sh
cargo build --release -p adjoint-bench --features cuda
mkdir -p .dev/adbench
cp target/gpu/array-tests .dev/array-tests
cp target/release/adjoint-bench .dev/adjoint-bench
strip .dev/adjoint-bench
data=../shared/adbench
if [ -d "$data/gmm" ]; then
    cp -r "$data/gmm" "$data/ba" .dev/adbench/
else
    echo "no $data: the bench will generate inputs in ADBench's format there" >&2
fi
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
du -sh .dev
