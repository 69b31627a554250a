"""A fresh ssh key pair for the ssh plugin's Secret.

Volcano's ssh plugin (volcano-sh/volcano ``pkg/controllers/job/plugins/ssh/ssh.go``)
creates one RSA key pair per job when the job is added and stores ``id_rsa`` (PEM,
PKCS#1), ``id_rsa.pub`` (authorized_keys format) and ``config`` in the Secret
``<job>-ssh``. We do the same, with 2048-bit keys rather than Volcano's 1024 (OpenSSH
refuses RSA keys under 1024 bits and current distributions warn below 2048). The pair is
made only when the Secret is created, so rendering stays deterministic and the private
key lives nowhere but in the member cluster.
"""

from __future__ import annotations

from dataclasses import replace

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from agents.core.records import SSH_PRIVATE_KEY, SSH_PUBLIC_KEY, SecretManifest

KEY_BITS = 2048


def new_key_pair() -> tuple[str, str]:
    """(private key PEM, public key in authorized_keys format). CPU-bound (tens of
    milliseconds): call it off the event loop."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode() + "\n"


def with_key_pair(manifest: SecretManifest) -> SecretManifest:
    """The Secret to create: ``manifest`` plus a fresh key pair when it asks for one."""
    if not manifest.key_pair:
        return manifest
    private, public = new_key_pair()
    return replace(manifest, data={**manifest.data, SSH_PRIVATE_KEY: private, SSH_PUBLIC_KEY: public})
