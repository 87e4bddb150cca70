#!/usr/bin/env bash
# Run 37: Nsight Compute on the unary chain's compiled piece at 2^12 (issue 24's target there is missed
# with the device time alone at 0.254 us/node): one full piece of 448 steps, --set full, after the
# pieces have compiled (launches of the interpreter before then are not matched by the name).
set -u
start=$SECONDS
W=/tmp/run37; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run37.tar.xz run37; }
[ -x build/bin/tapewise-bench ] || bash build-gpu-pack/setup.sh
timeout 200 ncu --kernel-name regex:tapewise_compiled_piece --launch-skip 30 --launch-count 2 --set full \
  --export $W/chain_2e12 build/bin/tapewise-bench --no-kernels --chain-sizes 12 --chain-shapes unary > $W/ncu.txt 2>&1
echo "ncu exit $? after $((SECONDS - start)) s"; tail -n 5 $W/ncu.txt
ncu --import $W/chain_2e12.ncu-rep --page details > $W/chain_2e12_details.txt 2>&1
grep -E "Duration|Elapsed Cycles|Executed Ipc|Issue Slots Busy|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Executed Instructions  |Grid Size|Block Size|SM Frequency|No Eligible|Active Warps Per" $W/chain_2e12_details.txt | head -40
rm -f $W/chain_2e12.ncu-rep; save
echo "total $((SECONDS - start)) s"
