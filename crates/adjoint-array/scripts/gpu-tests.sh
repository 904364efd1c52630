#!/usr/bin/env bash
# Build the array engine's tests with the CUDA backend on this machine (CUDA need not be
# installed) for a GPU machine that has no Rust toolchain, e.g. the `device` machine:
#
#   crates/adjoint-array/scripts/gpu-tests.sh            # here: writes target/gpu/array-tests
#   ADJOINT_CUDA_TESTS=1 target/gpu/array-tests on_the_gpu --nocapture   # there
#
# (with the device tool: carry ["target/gpu"]). The GPU test runs every code-generation test
# case on the GPU, compares with the interpreter and checks run-to-run bit identity.
set -euo pipefail
cd "$(dirname "$0")/../../.."
json=$(cargo test --release -p adjoint-array --features cuda --lib --no-run --message-format=json)
bin=$(printf '%s\n' "$json" | grep -o '"executable":"[^"]*"' | tail -n 1 | cut -d'"' -f4)
if [ -z "$bin" ]; then
    echo "no test binary was built" >&2
    exit 1
fi
mkdir -p target/gpu
cp "$bin" target/gpu/array-tests
strip target/gpu/array-tests
ls -l target/gpu/array-tests
