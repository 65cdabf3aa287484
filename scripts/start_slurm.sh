#!/usr/bin/env bash
# A throwaway one-node Slurm (Debian 12 slurm-wlm 22.05) cluster on 127.0.0.1, as root, for tests and demos.
#
# Everything lives in $SLURM_TEST_DIR (config, state, logs, pid files) and the daemons listen on the ports
# given, so two clusters (two test sessions) can run side by side and nothing in /etc/slurm is touched.
# Clients find this cluster through SLURM_CONF=$SLURM_TEST_DIR/slurm.conf (printed on stdout at the end).
#
#   SLURM_TEST_DIR   folder for the cluster (required)
#   SLURMCTLD_PORT   slurmctld port (required; pick a free one)
#   SLURMD_PORT      slurmd port (required; pick a free one)
#   SLURM_CPUS       CPUs the node advertises (default 8: more than the machine has, so jobs run side by side)
#   SLURM_GPUS       fake GPUs (GRES gpu without device files) the node advertises (default 4), so
#                    `--gres=gpu:N` schedules like on a GPU cluster
#   WITH_ACCT=1      also start a throwaway MariaDB + slurmdbd so that sacct works (needs slurmdbd, mariadb-server)
#   SLURMDBD_PORT, MARIADB_PORT   ports for WITH_ACCT=1
#
# needs: apt-get install -y slurm-wlm munge   (scripts/test-services.sh installs them)
set -euo pipefail
D=${SLURM_TEST_DIR:?set SLURM_TEST_DIR}
CTLD_PORT=${SLURMCTLD_PORT:?set SLURMCTLD_PORT}
SLURMD_PORT=${SLURMD_PORT:?set SLURMD_PORT}
CPUS=${SLURM_CPUS:-8}
GPUS=${SLURM_GPUS:-4}
mkdir -p "$D/state" "$D/spool" "$D/log"

# munge is shared by every cluster on the machine: start it once.
mkdir -p /run/munge && chown munge:munge /run/munge
[ -s /etc/munge/munge.key ] || { runuser -u munge -- /usr/sbin/mungekey --create 2>/dev/null || \
  (dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null && chown munge:munge /etc/munge/munge.key \
   && chmod 400 /etc/munge/munge.key); }
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged

HOST=$(hostname -s)
MEM=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 / 2 ))
if [ "${WITH_ACCT:-0}" = 1 ]; then
  DBD_PORT=${SLURMDBD_PORT:?set SLURMDBD_PORT}
  DB_PORT=${MARIADB_PORT:?set MARIADB_PORT}
  ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu"
else
  ACCT="AccountingStorageType=accounting_storage/none"
fi
GRES_LINE=""
if [ "$GPUS" -gt 0 ]; then
  GRES_LINE="Gres=gpu:$GPUS"
  # Slurm drops file-less GPUs: plain files stand in for /dev/nvidia*, so jobs get CUDA_VISIBLE_DEVICES as usual.
  mkdir -p "$D/dev"
  for i in $(seq 0 $((GPUS - 1))); do : > "$D/dev/fakegpu$i"; done
  echo "NodeName=$HOST Name=gpu Count=$GPUS File=$D/dev/fakegpu[0-$((GPUS - 1))]" > "$D/gres.conf"
fi
cat > "$D/slurm.conf" <<CONF
ClusterName=gpuplan
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=64
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
JobAcctGatherType=jobacct_gather/linux
$ACCT
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
SchedulerParameters=sched_interval=1
MessageTimeout=5
KillWait=2
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM $GRES_LINE State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$D/slurm.conf"

if [ "${WITH_ACCT:-0}" = 1 ]; then
  # A throwaway database: no durability, small buffers (cuts MariaDB's first start from ~5 s to ~2 s).
  FAST_DB=(--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --innodb-flush-method=nosync --skip-log-bin
           --innodb-log-file-size=8M --innodb-buffer-pool-size=32M)
  [ -d "$D/mysql/mysql" ] || mariadb-install-db --user=root --datadir="$D/mysql" \
    --auth-root-authentication-method=normal --skip-test-db "${FAST_DB[@]}" > "$D/log/mariadb-install.log" 2>&1
  (mariadbd "${FAST_DB[@]}" --user=root --datadir="$D/mysql" --socket="$D/mysql.sock" --port="$DB_PORT" --bind-address=127.0.0.1 \
    --pid-file="$D/mariadb.pid" --log-error="$D/log/mariadb.err" >/dev/null 2>&1 &)
  for _ in $(seq 1 100); do mariadb -uroot --socket="$D/mysql.sock" -e 'select 1' >/dev/null 2>&1 && break; sleep 0.1; done
  mariadb -uroot --socket="$D/mysql.sock" -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
  cat > "$D/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$D/slurmdbd.pid
LogFile=$D/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
CONF
  chmod 600 "$D/slurmdbd.conf"
  # slurmdbd reads slurmdbd.conf from the folder of SLURM_CONF. slurmctld refuses to start on a fresh state
  # folder before slurmdbd answers; it then registers the cluster itself.
  /usr/sbin/slurmdbd
  deadline=$((SECONDS + 30))
  until timeout 2 sacctmgr -n list cluster >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "slurmdbd did not start" >&2; tail -n 20 "$D/log/slurmdbd.log" >&2; exit 1; }
    sleep 0.1
  done
fi

/usr/sbin/slurmctld -f "$D/slurm.conf"
/usr/sbin/slurmd -f "$D/slurm.conf"
deadline=$((SECONDS + 30))
until timeout 2 sinfo -h -o %T 2>/dev/null | grep -q '^idle'; do
  if [ $SECONDS -ge $deadline ]; then
    echo "slurm did not become idle" >&2; timeout 2 sinfo >&2 || true; tail -n 20 "$D"/log/*.log >&2 || true; exit 1
  fi
  sleep 0.1
done
echo "SLURM_CONF=$D/slurm.conf"
