#!/usr/bin/env bash
# Install the peer frameworks that `adjoint-bench adbench` measures side by side with adjoint:
# PyTorch, JAX and autograd from PyPI into peers/.venv, and ADOL-C from Debian (libadolc-dev),
# against which peers/adolc_peer.cpp is compiled into peers/build/adolc_peer.
# Never needed by CI or the tests. Re-running is safe. Set SKIP_TORCH=1 to leave PyTorch out
# (its PyPI wheels pull in several GB of CUDA libraries).
set -euo pipefail
cd "$(dirname "$0")"

python3 -m venv .venv
.venv/bin/pip install --upgrade pip
.venv/bin/pip install numpy jax autograd
if [ "${SKIP_TORCH:-0}" != 1 ]; then
    .venv/bin/pip install torch
fi

if ! dpkg -s libadolc-dev >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update
    $SUDO apt-get install -y libadolc-dev g++
fi
mkdir -p build
g++ -O3 -march=native -std=c++17 -o build/adolc_peer adolc_peer.cpp -ladolc
echo "peers installed: .venv (numpy, jax, autograd$([ "${SKIP_TORCH:-0}" != 1 ] && echo ', torch')), build/adolc_peer"
