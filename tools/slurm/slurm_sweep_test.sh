#!/usr/bin/env bash
# A sweep through a real Slurm (tools/slurm/local_cluster.sh: munged,
# slurmctld, slurmd on this machine): 8 cases of tiny problems as an 8-task
# job array (bench --submit=slurm), one task's bench killed mid-run and
# retried in place, the merge (bench --merge) against a local run of the same
# case list (tools/slurm/compare_runs.py: every field but times), a
# resubmission that runs only the cases whose results are gone, and bad input
# (an unknown case, a malformed configuration, no sbatch) refused by name.
# Without Slurm installed, or not as root (the daemons run as root), it says
# SKIPPED and passes. About a minute on 2 cores.
set -uo pipefail

skip() { echo "SKIPPED: $*"; exit 0; }
fail() { echo "FAIL: $*" >&2; exit 1; }

for program in slurmctld slurmd munged sbatch sinfo; do
  command -v "$program" >/dev/null ||
    skip "Slurm is not installed ($program not on PATH); tools/slurm/local_cluster.sh start installs slurm-wlm and munge (.ci/run's slurm phase does)"
done
[[ $(id -u) == 0 ]] || skip "the local cluster's daemons run as root, and this test is not"

runfiles=${TEST_SRCDIR:-$PWD/..}/remat_bench
[[ -d $runfiles ]] || runfiles=$PWD
bench=$runfiles/harness/bench
cluster=$runfiles/tools/slurm/local_cluster.sh
compare=$runfiles/tools/slurm/compare_runs.py
[[ -x $bench ]] || fail "no bench at $bench"

# A short path: the munge socket's must fit a sockaddr_un (108 bytes).
tmp=$(mktemp -d /tmp/remat-slurm-test.XXXXXX)
cleanup() {
  "$cluster" stop "$tmp/cluster" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM  # Bazel's timeout: the EXIT trap stops the daemons

# The tasks key their results by source commit: a checkout of its own, as
# `bazel run` gives the bench its workspace.
mkdir -p "$tmp/src"
(cd "$tmp/src" && git init -q && echo sweep >f && git add f &&
  git -c user.name=test -c user.email=test@localhost commit -qm sweep) || fail "git init"
export BUILD_WORKSPACE_DIRECTORY=$tmp/src

start=$SECONDS
"$cluster" start "$tmp/cluster" || fail "the local cluster did not start"
eval "$("$cluster" env "$tmp/cluster")"
echo "cluster up in $((SECONDS - start)) s"

cases=$tmp/cases.txt
"$bench" --problems=sin_plain,sin_recursive,sin_chain,layer_loss --engines=eager,recompute \
  --policies=as-written,nothing_saveable --write-cases="$cases" || fail "--write-cases"
ncases=$(grep -v '^#' "$cases" | sed -n 's/.*problem=\([^ ]*\) \(size=[^ ]*\)\{0,1\}.*/\1 \2/p' | sort -u | wc -l)
[[ $ncases == 8 ]] || fail "expected 8 cases in $cases, got $ncases"
sampling=(--max-row-seconds=0.1 --windows=1)

# The local run of the list.
t=$SECONDS
"$bench" --cases="$cases" "${sampling[@]}" --out="$tmp/local" >"$tmp/local.log" 2>&1 || {
  tail -20 "$tmp/local.log"
  fail "the local run failed"
}
local_s=$((SECONDS - t))

# The sweep: 8 tasks, one case each. Task 7 (layer_loss, the longest) is
# killed once, as soon as its bench runs: its retry must finish the case.
sweep=$tmp/sweep
t=$SECONDS
"$bench" --submit=slurm --cases="$cases" --tasks=8 --out="$sweep" --slurm-wait --slurm-tries=2 \
  --slurm-time=10 "${sampling[@]}" >"$tmp/submit.log" 2>&1 &
submit_pid=$!
killed=""
for ((i = 0; i < 1200; i++)); do
  [[ -z $killed ]] || break
  pid=$(pgrep -f -- "--task=7 --out=$sweep" | head -1)
  if [[ -n $pid ]]; then
    kill -9 "$pid" && killed=$pid
  fi
  kill -0 "$submit_pid" 2>/dev/null || break
  sleep 0.05
done
wait "$submit_pid"
submit_status=$?
sweep_s=$((SECONDS - t))
cat "$tmp/submit.log"
[[ -n $killed ]] || fail "task 7's bench was never seen running, so never killed"
((submit_status == 0)) || {
  tail -n 20 "$sweep"/logs/*.out
  fail "the job array failed (sbatch --wait exit status $submit_status)"
}
grep -q "task 7 try 1 failed" "$sweep/logs/task-7.out" || fail "task 7's log does not show its first try failing"
grep -q "task 7 try 2 of 2" "$sweep/logs/task-7.out" || fail "task 7 was not retried"
echo "task 7: killed (bench pid $killed) and retried"

"$bench" --merge="$sweep" --cases="$cases" --out="$tmp/merged" || fail "the merge failed"
python3 "$compare" "$tmp/local/latest.json" "$tmp/merged/latest.json" || fail "merged rows differ from the local run's"
echo "8 cases: local run ${local_s} s, through Slurm (8 tasks, --exclusive, one retry) ${sweep_s} s"

# Resume: nothing left to run; then one case's results gone, its task only.
"$bench" --submit=slurm --cases="$cases" --tasks=8 --out="$sweep" --slurm-wait "${sampling[@]}" 2>&1 |
  tee "$tmp/resubmit.log"
grep -q "nothing to submit" "$tmp/resubmit.log" || fail "a resubmission of a finished sweep submitted tasks"
rm "$(grep -l '"sin_recursive/D=64"' "$sweep"/case-*.json)"
"$bench" --merge="$sweep" --cases="$cases" --out="$tmp/partial" 2>"$tmp/partial.log" && fail "a merge with a case missing succeeded"
grep -q "sin_recursive/D=64" "$tmp/partial.log" || fail "the merge did not name the missing case"
"$bench" --submit=slurm --cases="$cases" --tasks=8 --out="$sweep" --slurm-wait "${sampling[@]}" 2>&1 |
  tee "$tmp/resubmit.log"
grep -q "(1 of 8 tasks" "$tmp/resubmit.log" || fail "the resubmission did not run exactly the one task"
grep -q "1 of 8 cases, 0 already current, 1 to run" "$sweep/logs/task-4.out" || fail "task 4 did not run its case"
"$bench" --merge="$sweep" --cases="$cases" --out="$tmp/merged2" || fail "the merge after resuming failed"
python3 "$compare" "$tmp/local/latest.json" "$tmp/merged2/latest.json" || fail "resumed rows differ"

# Bad input, each refused by name.
expect_error() {
  local what=$1 pattern=$2
  shift 2
  if "$@" >"$tmp/err.log" 2>&1; then fail "$what: succeeded"; fi
  grep -q -- "$pattern" "$tmp/err.log" || { cat "$tmp/err.log"; fail "$what: no '$pattern' in its error"; }
  echo "refused as expected, $what: $(grep -m1 -- "$pattern" "$tmp/err.log")"
}
printf 'problem=no_such_problem engine=eager variant=as-written\n' >"$tmp/bad_cases.txt"
expect_error "an unknown case" "bad_cases.txt:1: .*no_such_problem" \
  "$bench" --submit=slurm --cases="$tmp/bad_cases.txt" --tasks=1 --out="$tmp/bad"
printf 'partition = debug\nqueue = fast\n' >"$tmp/bad.conf"
expect_error "a malformed configuration" "bad.conf:2: unknown Slurm option 'queue'" \
  "$bench" --submit=slurm --slurm-config="$tmp/bad.conf" --cases="$cases" --tasks=8 --out="$tmp/bad"
expect_error "no sbatch" "sbatch is not on PATH" \
  env PATH=/nonexistent "$bench" --submit=slurm --cases="$cases" --tasks=8 --out="$tmp/bad"

echo "PASSED: a sweep through Slurm merges to the local run's rows"
