"""Podman containers standing in for cloud VMs, so the real boot scripts (AWS user data, GCP startup scripts) run
as they would on a machine: their own network namespace and hostname, a metadata service on the VM's own loopback
(support.vm_metadata), a shutdown that only marks the "VM" as powered off, and this machine's /usr as the
userland (support.hostimage: bash, curl, dash, python3). torch comes from the venv's site-packages, mounted
read-only with PYTHONPATH set (ENVIRONMENT.md), and `torchrun` is the console script's one line.

Two VMs of one run share a podman bridge network (a namespace the test creates; its 10.89.x addresses are private to
it) and a folder standing in for the run's storage (the scripts' shared-folder storage, `/shared/...`). A GCP VM runs
on the host's network so it reaches the fake Compute API on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.hostimage import host_userland_env, host_userland_image

HERE = Path(__file__).resolve().parent
VM_PATH = "/opt/vm-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STUBS = {
    # A VM's power-off: here it only records that the script asked for it (and when), then ends the "VM".
    "shutdown": '#!/bin/sh\ndate +%s > /vm/powered-off\n',
    "poweroff": '#!/bin/sh\ndate +%s > /vm/powered-off\n',
    # What pip's torchrun console script runs (torch.distributed.run:main).
    "torchrun": '#!/bin/sh\nexec python3 -m torch.distributed.run "$@"\n',
}


@dataclass
class Vm:
    name: str
    folder: Path  # mounted at /vm: boot.sh, metadata.json, requests.log, base/ (BASE_DIR), powered-off
    ip: str | None

    @property
    def run_dir(self) -> Path:
        return self.folder / "base" / "run"

    def text(self, name: str) -> str:
        path = self.run_dir / name
        return path.read_text() if path.exists() else ""


@dataclass
class VmLab:
    """Start "VMs" from boot scripts; remove every container and the network when closed."""

    folder: Path
    network: str | None = None
    subnet: str | None = None
    vms: list[Vm] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.image = host_userland_image()
        self.env = {**os.environ, **host_userland_env(self.folder)}
        bin_dir = self.folder / "vm-bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(HERE / "vm_metadata.py", bin_dir / "metadata.py")
        for name, text in STUBS.items():
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        (self.folder / "shared").mkdir(exist_ok=True)

    def podman(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, check=check,
                              timeout=timeout)

    def create_network(self, prefix: str | None = None) -> None:
        """A bridge network of this test's own, on a free 10.89.x.0/24; or on `prefix`.0/24 when the cloud
        decides the addresses (an Azure NIC's, from the run's own VNet), waiting a while for another test's lab
        to free it."""
        candidates = [prefix] * 30 if prefix else [f"10.89.{random.randint(20, 250)}" for _ in range(20)]
        for subnet in candidates:
            name = f"gpuplan-vmlab-{os.getpid()}-{subnet.replace('.', '-')}"
            made = self.podman("network", "create", "--subnet", f"{subnet}.0/24", name, check=False)
            if made.returncode == 0:
                self.network, self.subnet = name, subnet
                return
            if prefix:
                time.sleep(2)
        raise RuntimeError(f"no free podman subnet: {made.stderr}")

    def start(self, name: str, script: str, metadata: dict[str, object], *, host: int | None = None,
              metadata_port: int = 8169, extra: tuple[str, ...] = ()) -> Vm:
        """Boot a VM running `script` (its BASE_DIR moved under /vm/base). `host`: the last byte of its address
        on the lab's network; None: the host's network."""
        folder = self.folder / name
        folder.mkdir()
        (folder / "metadata.json").write_text(json.dumps(metadata))
        (folder / "boot.sh").write_text(script.replace("BASE_DIR=/var/lib/gpuplan", "BASE_DIR=/vm/base", 1))
        # A container sees the host's /proc/uptime (hours on a CI machine), but a VM's boot script reads its own
        # boot time from it (the fail-safe counts from the boot): the stand-in VM has just booted.
        (folder / "uptime").write_text("1.00 1.00\n")
        ip = f"{self.subnet}.{host}" if host is not None and self.subnet else None
        site = sysconfig.get_paths()["purelib"]
        net = ["--network", self.network, "--ip", ip, "--hostname", name] if ip and self.network else \
            ["--network", "host"]
        port = str(metadata_port)
        boot = (f"python3 /opt/vm-bin/metadata.py /vm/metadata.json {port} & "
                f"for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:{port}/ && break; sleep 0.05; done; "
                "exec bash /vm/boot.sh")
        self.podman("run", "-d", "--init", "--name", f"gpuplan-vmlab-{os.getpid()}-{name}", *net,
                    "-v", f"{folder}:/vm", "-v", f"{self.folder / 'vm-bin'}:/opt/vm-bin:ro",
                    "-v", f"{site}:/opt/site:ro", "-v", f"{self.folder / 'shared'}:/shared",
                    "-v", f"{folder / 'uptime'}:/proc/uptime:ro",
                    "-e", "PYTHONPATH=/opt/site", "-e", f"PATH={VM_PATH}", *extra,
                    self.image, "/bin/bash", "-c", boot)
        vm = Vm(name, folder, ip)
        self.vms.append(vm)
        return vm

    def wait(self, vm: Vm, timeout: float = 120) -> int:
        done = self.podman("wait", f"gpuplan-vmlab-{os.getpid()}-{vm.name}", timeout=timeout)
        return int(done.stdout.strip().splitlines()[-1])

    def close(self) -> None:
        for vm in self.vms:
            self.podman("rm", "-f", "-t", "0", f"gpuplan-vmlab-{os.getpid()}-{vm.name}", check=False)
        if self.network:
            self.podman("network", "rm", "-f", self.network, check=False)
