#!/usr/bin/env bash
# tools/api_docs.sh — the HTML API reference: configures a small CPU-only build folder (build-docs/,
# no tests, no tools), builds the Doxygen target tapewise_api_docs from the installed headers, fails
# on any Doxygen warning (an undocumented public symbol is one) and prints how many symbols and pages
# the reference documents. Output: build-docs/docs/api/html/index.html. Needs doxygen (setup.sh
# --for-tests installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${TAPEWISE_DOCS_BUILD:-build-docs}"
mkdir -p "$dir"
cmake -S . -B "$dir" -DTAPEWISE_BUILD_DOCS=ON -DTAPEWISE_CUDA=OFF -DTAPEWISE_BUILD_TESTS=OFF \
      -DTAPEWISE_BUILD_TOOLS=OFF -DTAPEWISE_INSTALL=OFF > "$dir/configure.log" 2>&1 ||
  { cat "$dir/configure.log" >&2; echo "api_docs.sh: configure failed" >&2; exit 1; }
# A fresh run each time: Doxygen only warns about what it reads, and a stale output hides nothing new.
rm -rf "$dir/docs/api"
log="$dir/api_docs.log"
if ! cmake --build "$dir" --target tapewise_api_docs > "$log" 2>&1 || grep -qi 'warning:' "$log"; then
  grep -i 'warning\|error' "$log" >&2 || cat "$log" >&2
  echo "api_docs.sh: Doxygen warned (see $log): every public symbol needs a /// comment" >&2
  exit 1
fi
xml="$dir/docs/api/xml"
# The main page (cmake/api_mainpage.dox) is the reference's front door: an empty one once shipped.
if ! grep -q 'tapewise::Tape' "$xml/indexpage.xml" 2>/dev/null; then
  echo "api_docs.sh: the main page (index.html) is empty or lost its text: see cmake/api_mainpage.dox" >&2
  exit 1
fi
# Documented symbols, from the XML index: members (functions, variables, typedefs, enums, macros;
# enum values counted apart, since a value needs no comment of its own) and compounds (classes,
# structs, namespaces, headers); pages: the HTML files written.
index="$xml/index.xml"
members=$(grep -o '<member refid="[^"]*" kind="[a-z]*"' "$index" | grep -v '"enumvalue"' | sort -u | wc -l)
values=$(grep -o '<member refid="[^"]*" kind="enumvalue"' "$index" | sort -u | wc -l)
compounds=$(grep -c -E '<compound refid="[^"]*" kind="(class|struct|namespace|union)"' "$index")
files=$(grep -c -E '<compound refid="[^"]*" kind="file"><name>[^<]*\.(h|hpp)<' "$index")
pages=$(find "$dir/docs/api/html" -name '*.html' | wc -l)
echo "api_docs.sh: $members documented members (and $values enum values), $compounds classes/structs/namespaces, $files headers, $pages HTML pages: $dir/docs/api/html/index.html"
