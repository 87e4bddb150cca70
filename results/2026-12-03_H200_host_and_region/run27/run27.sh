#!/usr/bin/env bash
# Run 27: where the region's time goes on the H200 (build-gpu-pack/prof_region.py), CUDA then CPU.
set -u
W=/tmp/run27; mkdir -p $W
export TAPEWISE_TORCH_NATIVE_DIR=$TAPEWISE_TORCH_NATIVE_DIR
python3 -c "import tapewise.torch" 2>/dev/null || python3 -m pip install -q --no-deps --force-reinstall wheelhouse/tapewise-*-cp312-*.whl
timeout 200 python3 build-gpu-pack/prof_region.py cuda > $W/prof_cuda.txt 2>&1; echo "cuda exit $?"; head -12 $W/prof_cuda.txt
tar -C /tmp -cJf $OUT/run27.tar.xz run27
