#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer on) and runs each for a while from the corpus
# kept in tools/fuzz/corpus/ (read only: what a run finds goes to
# $FUZZ_OUT/corpus/NAME, so the working tree stays clean; copy an input
# worth keeping into the tracked corpus by hand).
#   tools/fuzz/run.sh            # 30 s each (what .ci/run does)
#   tools/fuzz/run.sh 3600       # an hour each
# Prints one line per fuzzer with its executions; exits non-zero on a finding.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-30}
out=${FUZZ_OUT:-/tmp/remat-fuzz}
mkdir -p "$out"
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ is not installed (Debian: clang, libclang-rt-14-dev)" >&2
  exit 2
fi
# The arithmetic flags of the Bazel build (.bazelrc): without
# -ffp-contract=off clang fuses a * b + c where a target has FMA (its
# avx512f implies it), so the lanes' AVX-512 path would round differently
# from their scalar tails. Line tables only (what a sanitizer's report
# prints): a quicker compile than full -g.
flags=(-std=c++20 -O1 -gline-tables-only -I. -fno-fast-math -ffp-contract=off -fno-associative-math
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
# Each fuzzer links the sources of the Bazel target it fuzzes (less a
# main()): the lists are Bazel's, so a source added to the build cannot be
# missing here (a hand-kept list once failed CI at link time).
sources_of() {  # target [excluded file]...
  local target=$1 labels
  shift
  if ! labels=$(tools/bazel query "kind(\"source file\", deps($target))" 2>/dev/null); then
    echo "fuzz: 'tools/bazel query deps($target)' failed; run it to see why" >&2
    exit 2
  fi
  labels=$(printf '%s\n' "$labels" | grep '^//.*\.cc$' | sed -e 's#^//##' -e 's#:#/#')
  for excluded in "$@"; do labels=$(printf '%s\n' "$labels" | grep -vx "$excluded"); done
  if [[ -z $labels ]]; then
    echo "fuzz: Bazel named no sources for $target" >&2
    exit 2
  fi
  printf '%s\n' "$labels"
}
core=($(sources_of //engines/api:npy))
text=($(sources_of //engines/api:program_text))
cli=($(sources_of //tools:remat tools/remat_main.cc))

# Each source is compiled once into $out/obj (the three fuzzers share most
# of theirs), on every core at once, and again only when the contents of it
# or of a header it includes (clang's -MMD list), or the flags, changed: an
# object is keyed by a hash of those, not by times, so a new clone of the
# same sources (CI's) reuses $out's objects instead of compiling all of
# them again (every file of a fresh checkout is newer than any object).
# One clang++ per fuzzer over all its sources was 10 minutes of one core.
objects_of() {  # sources... -> prints the objects
  local src
  for src in "$@"; do printf '%s\n' "$out/obj/${src//\//__}.o"; done
}
content_key() {  # depfile -> prints the hash of the flags and every file it lists
  { printf '%s\n' "$flags_joined"
    sed -e 's/^[^:]*://' -e 's/\\$//' "$1" | tr ' ' '\n' | grep -v '^$' |
      while read -r dep; do
        printf '%s\n' "$dep"
        cat "$dep" 2>/dev/null || echo "(missing)"
      done
  } | sha256sum | cut -d' ' -f1
}
compile_one() {  # source
  local src=$1 obj
  obj="$out/obj/${src//\//__}.o"
  if [[ -f $obj && -f ${obj%.o}.d && -f ${obj%.o}.key ]] &&
     [[ $(content_key "${obj%.o}.d") == "$(cat "${obj%.o}.key")" ]]; then
    return 0
  fi
  clang++ "${flags[@]}" -fopenmp -MMD -MF "${obj%.o}.d" -c "$src" -o "$obj"
  content_key "${obj%.o}.d" >"${obj%.o}.key"
}
export -f content_key
export -f compile_one
export out
export flags_joined="${flags[*]}"
mkdir -p "$out/obj"
compile_all() {  # sources...
  printf '%s\n' "$@" | sort -u |
    xargs -P "$(nproc)" -I{} bash -c 'flags=($flags_joined); compile_one "$1"' _ {}
}
build() {  # name sources...
  local name=$1
  shift
  local objs
  mapfile -t objs < <(objects_of "$@" "tools/fuzz/$name.cc")
  if [[ ! -x $out/$name || -n $(find "${objs[@]}" -newer "$out/$name" 2>/dev/null) ]]; then
    echo "fuzz: linking $name" >&2
    # -fopenmp: engines/onednn/platform.cc reads OpenMP's thread count.
    clang++ "${flags[@]}" -fopenmp "${objs[@]}" -o "$out/$name" -ldnnl -lboost_program_options -lglpk
  fi
}
echo "fuzz: compiling $(printf '%s\n' "${core[@]}" "${text[@]}" "${cli[@]}" | sort -u | wc -l) sources and 3 fuzzers on $(nproc) cores" >&2
compile_all "${core[@]}" "${text[@]}" "${cli[@]}" tools/fuzz/npy_fuzzer.cc tools/fuzz/cli_fuzzer.cc \
  tools/fuzz/program_text_fuzzer.cc || { echo "fuzz: compiling failed" >&2; exit 2; }
build npy_fuzzer "${core[@]}"
build cli_fuzzer "${cli[@]}"
build program_text_fuzzer "${text[@]}"

status=0
for name in npy_fuzzer cli_fuzzer program_text_fuzzer; do
  corpus=tools/fuzz/corpus/${name%_fuzzer}
  log=$out/$name.log
  mkdir -p "$out/corpus/$name"
  if ! ASAN_OPTIONS=detect_leaks=1 "$out/$name" "$out/corpus/$name" "$corpus" -max_total_time="$seconds" \
      -max_len=4096 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    echo "fuzz: $name FOUND A FAILURE; see $log" >&2
    tail -40 "$log" >&2
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  echo "fuzz: $name ran $runs inputs in ${seconds}s (corpus $corpus: $(ls "$corpus" | wc -l) files)"
done
exit $status
