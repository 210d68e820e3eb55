#!/usr/bin/env bash
# tools/ci_full.sh: the whole matrix, what .ci/run samples to stay within 45
# minutes. Run it before resolving a change that touches kernels or the
# executor (about 80 minutes on 2 cores):
#   every test natively, with the exhaustive sizes (REMAT_FULL=1: every
#     generated mutant, the peak budgets' and outside engines' whole case
#     lists, where a test reads it);
#   the whole tree again under ONEDNN_MAX_CPU_ISA=AVX2 and SSE41 and on one
#     OpenMP thread (less the JAX and PyTorch engines' tests: their
#     arithmetic is not ours, and no cap changes it);
#   the whole tree under AddressSanitizer (less those and the gallery, whose
#     engines are faults on purpose);
#   each libFuzzer target for REMAT_FUZZ_SECONDS (default 300).
# Ends with each phase's time and "N passed, N failed", as .ci/run does.
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0
failed=0
status=0
phases=()
stampfile=$(mktemp)
trap 'rm -f "$stampfile"' EXIT
stamp() { touch "$stampfile"; sleep 1; }
count() {
  local testlogs p f
  testlogs=$(tools/bazel info "$@" bazel-testlogs 2>/dev/null)
  [[ -d "$testlogs" ]] || return 0
  read -r p f < <(python3 tools/count_tests.py "$stampfile" "$testlogs")
  passed=$((passed + p))
  failed=$((failed + f))
}
begin() { echo "== $1"; phase_name=$1; phase_start=$SECONDS; }
end() { phases+=("$(printf '%-44s %5d s' "${phase_name}" "$((SECONDS - phase_start))")"); }

begin "python env"
tools/python_env.sh || echo "SKIPPED: tools/python_env.sh failed; the JAX and PyTorch tests skip"
end

begin "native, exhaustive: //..."
stamp
tools/bazel test --nocache_test_results --test_env=REMAT_FULL=1 --test_env=REMAT_VENV="$PWD/.venv" //... || status=1
count
end

no_py=(-- //... -//tools:jax_engine_test -//tools:torch_engine_test -//tools:torch_compile_budget_test
       -//tools:torch_export_test)
for cap in "ONEDNN_MAX_CPU_ISA=AVX2" "ONEDNN_MAX_CPU_ISA=SSE41" "OMP_NUM_THREADS=1 ONEDNN_MAX_CPU_ISA=AVX2"; do
  envs=()
  for kv in $cap; do envs+=(--test_env="$kv"); done
  begin "$cap: //..."
  stamp
  tools/bazel test --nocache_test_results "${envs[@]}" "${no_py[@]}" || status=1
  count
  end
done

begin "AddressSanitizer: //..."
stamp
tools/bazel test --nocache_test_results --config=asan "${no_py[@]}" -//harness/gallery:gallery_test \
  -//harness/gallery:mutant_test || status=1
count --config=asan
end

begin "fuzzers"
if tools/fuzz/run.sh "${REMAT_FUZZ_SECONDS:-300}"; then passed=$((passed + 3)); else failed=$((failed + 1)); status=1; fi
end

echo "== phase times"
for line in "${phases[@]}"; do echo "$line"; done
echo "${passed} passed, ${failed} failed"
((status == 0 && failed == 0 && passed > 0))
