#!/usr/bin/env bash
# tools/setup.sh [--for-tests] — one step from a fresh Debian machine to a built tapewise: installs the
# Debian packages the build needs (only those missing; silent when all are present), configures and
# builds into build/. CUDA is optional: with nvcc (on the PATH or in /usr/local/cuda/bin) the CUDA
# backend is built too. --for-tests also installs what the whole test run needs (tools/test.sh):
# clang for the fuzzers, pkg-config, doxygen for the API reference, and the Python packages from
# PyPI into a virtual environment.
# Build folder: $TAPEWISE_BUILD (default build/); GPU architecture: $CUDA_ARCH (default 90);
# virtual environment: $TAPEWISE_VENV (default .venv/).
set -euo pipefail
cd "$(dirname "$0")/.."

for_tests=0
for arg in "$@"; do
  case "$arg" in
    --for-tests) for_tests=1 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup: unknown option '$arg' (expected --for-tests)" >&2; exit 2 ;;
  esac
done

# python3: the runner's CLI tests read its JUnit reports with Python's XML parser.
packages=(cmake ninja-build g++ librapidcheck-dev libgtest-dev libeigen3-dev libboost-dev
          libmpfr-dev libgmp-dev libexpected-dev libcli11-dev nlohmann-json3-dev libdlpack-dev python3)
# python3-venv: Debian's Python refuses `pip install` outside a virtual environment (PEP 668), and
# its venv module needs this package to bootstrap pip.
((for_tests)) && packages+=(clang libclang-rt-14-dev pkg-config python3-venv python3-dev doxygen)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The test run's Python packages live in a virtual environment of the project's own, which
# tools/test.sh puts first on the PATH: it works with Debian's Python and touches no system site.
if ((for_tests)); then
  venv="${TAPEWISE_VENV:-.venv}"
  python_packages=(nanobind scikit-build-core numpy pytest hypothesis jax jaxlib bitwuzla matplotlib)
  [ -x "$venv/bin/python3" ] || { echo "setup: creating the virtual environment $venv"; python3 -m venv "$venv"; }
  "$venv/bin/python3" -c "import nanobind, scikit_build_core, numpy, pytest, hypothesis, jax, bitwuzla, matplotlib" 2>/dev/null ||
    { echo "setup: installing Python packages ${python_packages[*]} into $venv"
      "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${python_packages[@]}"; }
fi

command -v nvcc >/dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || echo "setup: nvcc not found: building the CPU backend only (CUDA tests are not built)"

build="${TAPEWISE_BUILD:-build}"
# Static C++ runtime, MPFR and GMP: the binaries run unchanged on the GPU machine.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
      -DTAPEWISE_STATIC_RUNTIME=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
