#!/usr/bin/env bash
# tools/build_wheel.sh — builds a binary wheel of the Python package tapewise (CUDA backend for sm_90)
# for a given Python into wheelhouse/, for a machine that cannot build it itself (e.g. one without
# Debian's tl-expected and dlpack headers): the extension carries libtapewise and the static CUDA
# runtime, so the wheel installs there with `pip install --no-deps`.
#
#   tools/build_wheel.sh [--python PY] [--ref REV | --worktree]
#
# --python: the interpreter the wheel is for (default: pyenv's 3.12.1); nanobind and scikit-build-core
#   are installed into it with its pip where missing (the build runs without isolation, on those).
# --ref: the commit to build (default HEAD), exported with `git archive`, so that edits in progress
#   in the working tree never end up in a wheel; --worktree builds the working tree as it is.
# The CMake build folder is build-wheel<major><minor>/ (kept between runs: a rebuild is incremental).
# Prints the wheel's path, size and build time, and how its extension links (ldd).
set -euo pipefail
python=$HOME/.pyenv/versions/3.12.1/bin/python3
ref=HEAD
worktree=0
while (($#)); do
  case $1 in
    --python) python=${2:?--python needs an interpreter}; shift 2 ;;
    --ref) ref=${2:?--ref needs a revision}; shift 2 ;;
    --worktree) worktree=1; shift ;;
    *) echo "usage: tools/build_wheel.sh [--python PY] [--ref REV | --worktree]" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if ! "$python" -c "import nanobind, scikit_build_core" 2>/dev/null; then
  "$python" -m pip install --quiet nanobind scikit-build-core
fi
tag=$("$python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
build_dir=$root/build-wheel$tag
wheelhouse=$root/wheelhouse
mkdir -p "$wheelhouse"

if ((worktree)); then
  source_dir=$root
  built_from="working tree of $(git rev-parse --short HEAD)"
else
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
rm -f "$wheelhouse"/tapewise-*-cp"$tag"-*.whl
started=$(date +%s)
"$python" -m pip wheel --no-deps --no-build-isolation --wheel-dir "$wheelhouse" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 -Ccmake.define.TAPEWISE_CUDA=ON \
  -Cbuild-dir="$build_dir" "$source_dir"
seconds=$(($(date +%s) - started))

wheel=$(ls "$wheelhouse"/tapewise-*-cp"$tag"-*.whl)
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1), $(stat -c %s "$wheel") bytes), from $built_from, built in ${seconds}s"
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
"$python" -m zipfile -e "$wheel" "$unpacked"
extension=$(ls "$unpacked"/tapewise/_tapewise*.so)
echo "ldd $(basename "$extension"):"
ldd "$extension"
# The newest glibc and libstdc++ symbol versions the extension asks for: the oldest system it loads on.
echo "needs: $(objdump -T "$extension" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)," \
  "$(objdump -T "$extension" | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)"
