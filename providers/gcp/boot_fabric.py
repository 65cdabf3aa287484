"""The GCP boot script's fabric hooks (gpuplan.jobs.boot_cloud `fabric_run_args`, `fabric_note`): GPUDirect-TCPX.

A multi-node A3 High/Edge VM gets four GPU data NICs (providers/gcp/data_nics.py). NCCL uses them only through the
GPUDirect-TCPX NCCL plugin (`libnccl-net.so` from Google's nccl-plugin-gpudirecttcpx, installed under
/usr/local/tcpx/lib64 in the container) talking to the Receive Data Path Manager (RxDM, google/tcpgpudmarxd) over
UNIX sockets in /run/tcpx, with the NCCL environment Google documents for a3-highgpu-8g
(https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx#environment-variables-nccl;
the VM recipe https://cloud.google.com/compute/docs/gpus/gpudirect): the control traffic on eth0, the data on
eth1-eth4, the CPU bindings of each NIC, the chunk and buffer sizes. Those values are fixed text here (no user
value enters them).

The VM says itself whether it is such a machine: its machine type and the number of its interfaces come from the
metadata server (https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys: `instance/machine-type`,
`instance/network-interfaces/`), so the hooks work whichever renderer wrote the script. On a TCPX VM the container
gets /run/tcpx (GPUPLAN_TCPX_DIR moves it for the tests) and the environment; the job log says when the image has
no TCPX plugin or the VM runs no RxDM (NCCL then uses plain TCP on eth0). gpuplan does not start the RxDM: it
needs a TCPX-enabled guest kernel (Container-Optimized OS images), see docs/providers/gcp.md. A3 Mega (TCPXO)
gets its eight data NICs, and a note: its plugin ships its own environment (nccl-env-profile.sh) to source.
"""

from __future__ import annotations

# Google's NCCL settings for GPUDirect-TCPX on a3-highgpu-8g (module doc), one NAME=VALUE a line.
TCPX_ENV = (
    "NCCL_SOCKET_IFNAME=eth0",
    "NCCL_CROSS_NIC=0",
    "NCCL_ALGO=Ring",
    "NCCL_PROTO=Simple",
    "NCCL_NSOCKS_PERTHREAD=4",
    "NCCL_SOCKET_NTHREADS=1",
    "NCCL_NET_GDR_LEVEL=PIX",
    "NCCL_P2P_PXN_LEVEL=0",
    "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4",
    "NCCL_GPUDIRECTTCPX_CTRL_DEV=eth0",
    "NCCL_DYNAMIC_CHUNK_SIZE=524288",
    "NCCL_P2P_NET_CHUNKSIZE=524288",
    "NCCL_P2P_PCI_CHUNKSIZE=524288",
    "NCCL_P2P_NVL_CHUNKSIZE=1048576",
    "NCCL_BUFFSIZE=4194304",
    "NCCL_GPUDIRECTTCPX_TX_BINDINGS=eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
    "NCCL_GPUDIRECTTCPX_RX_BINDINGS=eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
    "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS=50000",
    "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX=/run/tcpx",
)

_ENV_ARGS = " \\\n".join(f"    -e '{kv}'" for kv in TCPX_ENV)

GCP_FABRIC_HOOKS = r"""gpu_fabric() {
  # tcpx / tcpxo when this VM carries the GPU data NICs of a multi-node A3 run; fails otherwise.
  local machine nics
  machine=$(curl -fsS -m 5 -H 'Metadata-Flavor: Google' "$METADATA_URL/instance/machine-type" 2>/dev/null) \
    || return 1
  nics=$(curl -fsS -m 5 -H 'Metadata-Flavor: Google' "$METADATA_URL/instance/network-interfaces/" 2>/dev/null \
    | grep -c /) || return 1
  case "${machine##*/}" in
    a3-megagpu-8g) [ "$nics" -ge 9 ] && echo tcpxo ;;
    a3-highgpu-8g | a3-edgegpu-8g*) [ "$nics" -ge 5 ] && echo tcpx ;;
    *) return 1 ;;
  esac
}

fabric_run_args() {
  [ "$(gpu_fabric)" = tcpx ] || return 0
  printf '%s\n' -v "${GPUPLAN_TCPX_DIR:-/run/tcpx}:/run/tcpx" \
@ENV_ARGS@
}

fabric_note() {
  local fabric libs="/usr/local/tcpx/lib64/libnccl-net*.so /usr/local/nvidia/lib64/libnccl-net*.so"
  fabric=$(gpu_fabric) || return 0
  if [ "$fabric" = tcpxo ]; then
    echo "gpuplan: note: A3 Mega GPUDirect-TCPXO: the job must source the TCPXO plugin's nccl-env-profile.sh"
    return 0
  fi
  if [ ! -d "${GPUPLAN_TCPX_DIR:-/run/tcpx}" ]; then
    echo "gpuplan: note: no GPUDirect-TCPX receive-datapath manager (RxDM) on this VM: NCCL uses TCP on eth0"
  fi
  if ! "$1" run --rm --entrypoint /bin/sh "$2" -c "ls $libs" >/dev/null 2>&1; then
    echo "gpuplan: note: image $2 has no GPUDirect-TCPX NCCL plugin (libnccl-net.so): NCCL will not use the data NICs"
  fi
}
"""

GCP_FABRIC_HOOKS = GCP_FABRIC_HOOKS.replace("@ENV_ARGS@", _ENV_ARGS)
