#!/usr/bin/env bash
# tools/bits_dump.sh REMAT OUT: loss and gradients of every problem (default
# sizes) on every engine, and on recompute and planned under the policies
# and schedules below, dumped with `remat run --wrt all --dump` into
# OUT/<problem>.<engine>.<variant>/. Run it with the remat of two commits and
# compare the dumps byte for byte, to show that a refactor kept every bit:
#
#   tools/bits_dump.sh OLD/bazel-bin/tools/remat /tmp/old
#   tools/bits_dump.sh bazel-bin/tools/remat /tmp/new
#   for f in /tmp/old/*/*.npy; do cmp "$f" "/tmp/new/${f#/tmp/old/}"; done
#
# Runs a problem refuses (a schedule on a problem with no scan and no chain)
# are listed in OUT/failures, one line each; compare those lists too. The
# float64 engines skip transformer_stack (minutes at its default size).
set -uo pipefail
remat=$1
out=$2
mkdir -p "$out"
problems="layer_loss scan_stack dot_policy sin_chain sin_plain sin_recursive mlp_chain transformer_stack"
variants="none policy=nothing_saveable policy=everything_saveable policy=dots_saveable"
variants+=" policy=offload_dot_with_no_batch_dims policy=memory_budget:0.5 schedule=sqrt schedule=revolve:2"
for p in $problems; do
  for e in eager recompute planned dtr reference oracle; do
    for v in $variants; do
      args=()
      case $v in
        policy=*) args=(--policy "${v#policy=}") ;;
        schedule=*) args=(--schedule "${v#schedule=}") ;;
      esac
      if [[ $e != recompute && $e != planned && $v != none ]]; then continue; fi
      if [[ $p == transformer_stack && ($e == reference || $e == oracle) ]]; then continue; fi
      d="$out/$p.$e.${v//[:=]/_}"
      "$remat" run --problem "$p" --engine "$e" --wrt all "${args[@]}" --dump "$d" >"$d.log" 2>&1 ||
        echo "fail $p.$e.${v//[:=]/_}" >>"$out/failures"
      rm -f "$d/stats.json"  # times differ run to run
    done
  done
done
