#!/usr/bin/env bash
# Run 23: every C++ test of the final commit on the H200 (the moved-from tape's test among them).
set -u
start=$SECONDS
W=/tmp/run23; mkdir -p $W
bash build-gpu-pack/setup.sh
timeout 240 build/bin/tapewise_tests --gtest_brief=1 > $W/tests.txt 2>&1; echo "tests exit $? after $((SECONDS - start)) s"
tail -3 $W/tests.txt
build/bin/tapewise_tests --gtest_filter='*MovedFrom*' 2>&1 | grep -E "OK|FAILED|PASSED" | tee $W/moved_from.txt
tar -C /tmp -cJf $OUT/run23.tar.xz run23
