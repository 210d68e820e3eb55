#!/usr/bin/env bash
# A one-node Slurm cluster on this machine (slurmctld, slurmd, munged), for
# tests and CI: tools/slurm/slurm.conf.in filled in for this host.
#
#   tools/slurm/local_cluster.sh install        # apt-get install slurm-wlm munge if missing (root)
#   tools/slurm/local_cluster.sh start [DIR]    # installs them too
#   eval "$(tools/slurm/local_cluster.sh env [DIR])"   # SLURM_CONF for sbatch, sinfo, ...
#   tools/slurm/local_cluster.sh status [DIR]
#   tools/slurm/local_cluster.sh stop [DIR]
#
# DIR (default $REMAT_SLURM_DIR, else ${TMPDIR:-/tmp}/remat-slurm) holds the
# configuration, the munge key and socket, the daemons' state, spool, pid
# files and logs. `start` waits until sinfo shows the node idle (at most
# $REMAT_SLURM_START_SECONDS, 60) and otherwise fails printing the daemons'
# logs; `stop` stops the three daemons it started. Exit status 3: Slurm is
# not installed and could not be (not root, or apt-get failed).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
dir=${2:-${REMAT_SLURM_DIR:-${TMPDIR:-/tmp}/remat-slurm}}
conf=$dir/slurm.conf

die() { echo "local_cluster.sh: $*" >&2; exit 1; }

installed() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null; }

install() {
  installed && return 0
  if [[ $(id -u) != 0 ]]; then
    echo "local_cluster.sh: slurm-wlm and munge are not installed, and installing them needs root" >&2
    exit 3
  fi
  echo "local_cluster.sh: installing slurm-wlm and munge (apt-get)" >&2
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >&2; then
    echo "local_cluster.sh: apt-get install slurm-wlm munge failed" >&2
    exit 3
  fi
  installed || { echo "local_cluster.sh: slurm-wlm installed but slurmctld/slurmd/munged/sbatch not on PATH" >&2; exit 3; }
}

# Two free TCP ports, "CTLD SLURMD" (the default 6817/6818 may be taken by a
# system Slurm); both held open while chosen, so that they differ.
free_ports() {
  python3 -c 'import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])'
}

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

show_logs() {
  local f
  for f in "$dir"/log/munged.log "$dir"/log/slurmctld.log "$dir"/log/slurmd.log; do
    [[ -f $f ]] || { echo "--- $f: missing" >&2; continue; }
    echo "--- $f (last 30 lines)" >&2
    tail -n 30 "$f" >&2
  done
}

write_conf() {
  local node cpus mem ports
  node=$(hostname -s)
  read -r -a ports < <(free_ports)
  [[ ${#ports[@]} == 2 ]] || die "cannot find two free TCP ports for slurmctld and slurmd"
  # slurmd -C: "NodeName=vm CPUs=2 ... RealMemory=24105"; a little memory
  # left to the system, so that the node is not drained for having less.
  cpus=$(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' | head -1)
  mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -1)
  [[ -n $cpus && -n $mem ]] || die "slurmd -C did not report CPUs and RealMemory"
  mem=$((mem * 95 / 100))
  sed -e "s|@NODE@|$node|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEM@|$mem|g" -e "s|@DIR@|$dir|g" \
      -e "s|@CTLD_PORT@|${ports[0]}|g" -e "s|@SLURMD_PORT@|${ports[1]}|g" \
      "$here/slurm.conf.in" >"$conf"
}

start() {
  install
  if pid_alive "$dir/slurmctld.pid" || pid_alive "$dir/slurmd.pid" || pid_alive "$dir/munge/munged.pid"; then
    die "a cluster is already running from $dir (local_cluster.sh stop $dir first)"
  fi
  mkdir -p "$dir"/{state,spool,log,munge} || die "cannot create $dir"
  chmod 755 "$dir/munge"  # the socket, for every user's sbatch; the key itself is 0400
  write_conf
  local key=$dir/munge/munge.key
  if [[ ! -s $key ]]; then
    dd if=/dev/urandom of="$key" bs=1024 count=1 status=none || die "cannot write the munge key $key"
  fi
  chmod 400 "$key"
  munged --force --key-file="$key" --socket="$dir/munge/munge.socket" \
         --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
         --seed-file="$dir/munge/munged.seed" \
    || { show_logs; die "munged did not start"; }
  export SLURM_CONF=$conf
  slurmctld -f "$conf" || { show_logs; die "slurmctld did not start"; }
  slurmd -f "$conf" || { show_logs; die "slurmd did not start"; }
  local limit=${REMAT_SLURM_START_SECONDS:-60} t=0 state=""
  while ((t < limit)); do
    state=$(sinfo -h -N -o '%T' 2>/dev/null | head -1)
    [[ $state == idle ]] && break
    # A node that came up after a stop is "down" or "drained" until resumed.
    if [[ $state == down* || $state == drain* ]]; then
      scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1
    fi
    sleep 1
    t=$((t + 1))
  done
  if [[ $state != idle ]]; then
    echo "local_cluster.sh: the node is not idle after ${limit} s (sinfo: '${state:-no answer}')" >&2
    show_logs
    stop
    exit 1
  fi
  echo "local_cluster.sh: cluster up in ${t} s: SLURM_CONF=$conf" >&2
}

stop_pid() {
  local name=$1 pidfile=$2 i
  pid_alive "$pidfile" || return 0
  local pid
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null
  for ((i = 0; i < 20; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  echo "local_cluster.sh: $name ($pid) did not stop; killing it" >&2
  kill -9 "$pid" 2>/dev/null
}

stop() {
  if [[ -f $conf ]] && command -v scancel >/dev/null; then
    SLURM_CONF=$conf scancel --user="$(id -un)" >/dev/null 2>&1 || true
  fi
  stop_pid slurmd "$dir/slurmd.pid"
  stop_pid slurmctld "$dir/slurmctld.pid"
  stop_pid munged "$dir/munge/munged.pid"
  echo "local_cluster.sh: stopped the cluster of $dir" >&2
}

status() {
  local ok=0 name pidfile
  for name in munged slurmctld slurmd; do
    pidfile=$dir/$name.pid
    [[ $name == munged ]] && pidfile=$dir/munge/munged.pid
    if pid_alive "$pidfile"; then echo "$name: running ($(cat "$pidfile"))"; else echo "$name: not running"; ok=1; fi
  done
  if ((ok == 0)); then SLURM_CONF=$conf sinfo -N; fi
  return $ok
}

case $cmd in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) echo "usage: $0 install|start|stop|status|env [DIR]" >&2; exit 2 ;;
esac
