#!/usr/bin/env bash
# Stop the cluster started by scripts/start_slurm.sh in $SLURM_TEST_DIR: only the daemons whose pid files are
# there (munged stays: other clusters on this machine share it). All at once, then wait (slurmctld takes ~3 s).
set -uo pipefail
D=${SLURM_TEST_DIR:?set SLURM_TEST_DIR}
pids=()
for name in slurmd slurmctld slurmdbd mariadb; do
  pidfile="$D/$name.pid"
  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null && pids+=("$pid")
done
for _ in $(seq 1 80); do
  alive=()
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
  [ ${#alive[@]} -eq 0 ] && exit 0
  sleep 0.1
done
for pid in "${alive[@]}"; do kill -9 "$pid" 2>/dev/null; done
exit 0
