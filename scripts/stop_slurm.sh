#!/usr/bin/env bash
# Stop the cluster started by scripts/start_slurm.sh in $SLURM_TEST_DIR: only the daemons whose pid files are
# there (munged stays: other clusters on this machine share it).
set -uo pipefail
D=${SLURM_TEST_DIR:?set SLURM_TEST_DIR}
for name in slurmd slurmctld slurmdbd mariadb; do
  pidfile="$D/$name.pid"
  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || continue
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
done
exit 0
