#!/usr/bin/env bash
# The bits of every problem under every engine, policy and schedule, as one
# line per case: what a refactor that must not change them ("every
# problem's gradients under every engine, policy and schedule keep their
# exact bits") compares before and after.
#
#   tools/bit_signatures.sh REMAT OUT      e.g. bazel-bin/tools/remat before.txt
#   (refactor, rebuild, copy the new binary)
#   tools/bit_signatures.sh REMAT2 after.txt && diff before.txt after.txt
#
# Each line: "problem | engine and flags | H [stats]", H the first 16 hex
# digits of the sha256 of loss.npy and every grad_*.npy (remat run --dump),
# the stats the fields of stats.json that do not measure time (peaks and
# their sites, predicted peak, FLOPs, residual bytes, kernel calls, op
# runs); a case that fails by design (a schedule on a problem with no scan)
# keeps the end of its error message instead. Needs python3 (stdlib only).
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 REMAT_BINARY OUT_FILE" >&2
  exit 2
fi
remat=$1
out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$out"
configs=(
  "eager" "reference" "recompute" "planned" "dtr"
  "recompute --policy nothing_saveable" "recompute --policy dots_saveable"
  "planned --policy nothing_saveable" "recompute --schedule sqrt"
  "recompute --schedule revolve:2" "dtr --memory-cap 0.5x"
  "recompute --policy memory_budget:0.5"
)
problems=$("$remat" list | awk '/^problems:/{p=1; next} /^[a-z]/{p=0} p && /^  [a-z]/{print $1}')
for p in $problems; do
  params=()
  case $p in  # smaller than the bench sizes where those take long
    transformer_stack) params=(--param L=2 --param D=64 --param F=128 --param S=16 --param H=4) ;;
    mlp_chain) params=(--param N=256) ;;
  esac
  for cfg in "${configs[@]}"; do
    read -r -a words <<< "$cfg"
    rm -rf "$tmp/d"
    if "$remat" run --problem "$p" --engine "${words[0]}" "${params[@]}" "${words[@]:1}" \
        --dump "$tmp/d" > "$tmp/log" 2>&1; then
      sig=$(python3 - "$tmp/d" <<'PY'
import glob, hashlib, json, os, sys
d = sys.argv[1]
h = hashlib.sha256()
for f in [os.path.join(d, "loss.npy")] + sorted(glob.glob(os.path.join(d, "grad_*.npy"))):
    with open(f, "rb") as fh:
        h.update(fh.read())
s = json.load(open(os.path.join(d, "stats.json")))
keys = ["arena_bytes", "first_run_peak_bytes", "flops_backward", "flops_forward",
        "flops_recomputed", "peak_bytes", "peak_bytes_by_category", "peak_site",
        "predicted_peak_bytes", "residual_bytes", "kernel_calls", "op_runs"]
print(h.hexdigest()[:16], [s.get(k) for k in keys])
PY
)
    else
      sig="error: $(tail -c 100 "$tmp/log" | tr '\n' ' ')"
    fi
    echo "$p | $cfg | $sig" >> "$out"
  done
done
echo "$(wc -l < "$out") cases written to $out"
