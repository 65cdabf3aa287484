"""The azure provider's own settings that are not the SDK's: the ssh key the VMs accept and the address ssh is
opened to.

Azure's Linux VMs need an ssh public key when password login is off (gpuplan turns it off): the `ssh_public_key`
setting (a path; else GPUPLAN_AZURE_SSH_PUBLIC_KEY), else the user's ~/.ssh/id_ed25519.pub or id_rsa.pub; with none,
a throwaway RSA key whose private half is never kept, so nobody can log in (ssh was not asked for). RSA because
Azure's VM ssh keys have long been RSA only
(https://learn.microsoft.com/troubleshoot/azure/virtual-machines/ed25519-ssh-keys); making one costs ~0.2 s.
https://learn.microsoft.com/azure/virtual-machines/linux/create-ssh-keys-detailed
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuplan.errors import UserError

SSH_FROM_ENV = "GPUPLAN_AZURE_SSH_FROM"
SSH_KEY_ENV = "GPUPLAN_AZURE_SSH_PUBLIC_KEY"
DEFAULT_KEYS = ("~/.ssh/id_ed25519.pub", "~/.ssh/id_rsa.pub")


def ssh_public_key(path: str | None) -> str:
    """The public key text the VMs accept for the `gpuplan` admin user."""
    path = path or os.environ.get(SSH_KEY_ENV) or None
    if path:
        file = Path(path).expanduser()
        try:
            return file.read_text().strip()
        except OSError as exc:
            raise UserError(f"[providers.azure] ssh_public_key {path}: cannot read it ({exc.strerror})") from exc
    for candidate in DEFAULT_KEYS:
        file = Path(candidate).expanduser()
        if file.is_file():
            return file.read_text().strip()
    return throwaway_key()


def throwaway_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return public.decode() + " gpuplan-no-login"


def ssh_source(setting: str | None) -> str | None:
    """The address ssh is opened to (`ssh_from` or GPUPLAN_AZURE_SSH_FROM), or None: no inbound rule at all."""
    import ipaddress

    value = setting or os.environ.get(SSH_FROM_ENV) or None
    if value is None:
        return None
    try:
        network = ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise UserError(f"azure: ssh_from {value!r} is not an IP address") from exc
    if network.num_addresses > 1:
        raise UserError(f"azure: ssh_from {value!r} opens more than one address; give your own address")
    return str(network.network_address)
