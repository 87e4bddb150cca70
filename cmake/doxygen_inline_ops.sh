#!/bin/sh
# cmake/doxygen_inline_ops.sh OPS_DEF HEADER — Doxygen's input filter for the API reference
# (cmake/api_docs.cmake): prints HEADER with each `#include <tapewise/ops.def>` replaced by the
# table's rows (its // comments left out). Doxygen's preprocessor reads an included file only for its
# macros, never its text, so without this the X-macro enums Op and tw_op would show no nodes.
# The rows reach awk through the environment: -v would read backslashes in them as escapes.
TAPEWISE_OPS_ROWS=$(grep -v '^//' "$1") && export TAPEWISE_OPS_ROWS &&
  exec awk '/^#include <tapewise\/ops\.def>/ { print ENVIRON["TAPEWISE_OPS_ROWS"]; next } { print }' "$2"
