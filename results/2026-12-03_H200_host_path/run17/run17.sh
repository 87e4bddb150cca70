#!/usr/bin/env bash
# Run 17: where the host's time goes on the CUDA backend: cuda_chain's sampler (every 40 us of the main
# thread), with the C library's symbols to name its part.
set -u
bash build-gpu-pack/setup.sh
W=/tmp/run17; mkdir -p $W
libc=$(ldd build-gpu-pack/cuda_chain | awk '/libc.so/ {print $3}')
nm -D --defined-only "$libc" > $W/libc_symbols.txt 2>&1
for n in 12 16; do
  TAPEWISE_COMPILED_PIECES=1 timeout 100 build-gpu-pack/cuda_chain $n 3000 $W/samples_$n.txt > $W/cuda_chain_$n.txt 2>&1; tail -1 $W/cuda_chain_$n.txt
done
tar -C /tmp -cJf $OUT/run17.tar.xz run17
