#!/usr/bin/env bash
# GPU call D (2026-12-06, twelfth session), the same warm machine: memcheck of the programs' tests
# (2ba2150) with compiled pieces off and on, twice each, and once without a sanitizer. As it ran, but
# for its scratch log, which it wrote to a fixed file of the device machine's /tmp and this names by
# mktemp. Its output is in README.md (it kept no files).
B=.gpu/bin; log=$(mktemp); [ -x $B/tapewise_tests ] || { rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; }
for v in "TAPEWISE_COMPILED_PIECES=0" "TAPEWISE_COMPILED_PIECES=1" "TAPEWISE_COMPILED_PIECES=0" "TAPEWISE_COMPILED_PIECES=1"; do
  s=$SECONDS; env $v RC_PARAMS="seed=5 max_success=10" timeout 70 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter='Backends/Programs.*cuda' > $log 2>&1
  echo "== memcheck $v: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY|PASSED|didn.t terminate' $log | tr '\n' ' ')"
done
s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout 60 $B/tapewise_tests --gtest_brief=1 --gtest_filter='Backends/Programs.*cuda' > $log 2>&1
echo "== plain: exit $? after $((SECONDS-s)) s"
