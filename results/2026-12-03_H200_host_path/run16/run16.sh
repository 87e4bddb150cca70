#!/usr/bin/env bash
# Run 16: where the host's time goes on the CUDA backend (a SIGPROF sampler in cuda_chain), the NVRTC
# compile time alone, and racecheck over the compiled-piece test with its steps in shared memory.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run16; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run16.tar.xz run16; }
nproc > $W/cpu.txt; cat /sys/fs/cgroup/cpu.max >> $W/cpu.txt 2>&1; lscpu | grep -E "Model name|MHz" >> $W/cpu.txt
for n in 12 16; do
  TAPEWISE_COMPILED_PIECES=1 timeout 60 build-gpu-pack/cuda_chain $n 300 $W/samples_$n.txt > $W/cuda_chain_$n.txt 2>&1; cat $W/cuda_chain_$n.txt
done
TAPEWISE_COMPILED_PIECES=0 timeout 60 build-gpu-pack/cuda_chain 12 300 $W/samples_12_interp.txt 2>&1 | tail -1
save
timeout 60 build/bin/tapewise_tests --gtest_filter='CompiledPieces.NvrtcCompilesEveryDtypeAndLaunchShape' 2>&1 | grep -E "OK|FAIL"
t0=$SECONDS
TAPEWISE_COMPILED_PIECES=1 TAPEWISE_PIECE_STEPS=shared timeout 300 compute-sanitizer --tool racecheck --error-exitcode 1 build/bin/tapewise_tests --gtest_brief=1 --gtest_filter="CompiledPieces.RepeatedRandomBlocksGiveThePerNodeBits" > $W/sanitizer_racecheck.txt 2>&1
echo "racecheck exit $? in $((SECONDS - t0)) s: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/sanitizer_racecheck.txt | tail -1) $(grep -E 'compiled pieces:|^\[  (PASSED|FAILED)' $W/sanitizer_racecheck.txt | tr '\n' ' ')"; save
echo "total $((SECONDS - start)) s"
