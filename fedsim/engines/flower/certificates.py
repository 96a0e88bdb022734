"""``fedsim flower certs`` and ``node-key``: a TLS federation's certificates, a SuperNode's key.

The SuperLink serves with ``server.pem`` and ``server.key``; SuperNodes and ``flwr`` trust
``ca.crt``. The server certificate names 127.0.0.1 and localhost, and any other host given
(the SuperLink's address as the SuperNodes reach it, for a federation across machines).

With SuperNode authentication (``flower-superlink --enable-supernode-auth``, which Flower
serves over TLS only) a SuperNode signs its requests with its own private key, and the
SuperLink accepts only the public keys registered with ``flwr supernode register``. Flower
reads both keys in OpenSSH format, on a NIST elliptic curve (`write_node_key`).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from partitions._io import write_atomic

#: The files `write_certificates` writes, in the order of `Certificates`' fields.
FILES = ("ca.crt", "server.pem", "server.key")


@dataclass(frozen=True)
class Certificates:
    """The three files of a TLS federation."""

    ca: Path
    certificate: Path
    key: Path

    @classmethod
    def in_folder(cls, folder, flag: str = "--tls") -> Certificates:
        """Return the certificates `write_certificates` wrote to ``folder``; refuse a folder that lacks one."""
        paths = [Path(folder).resolve() / name for name in FILES]
        missing = [path.name for path in paths if not path.is_file()]
        if missing:
            raise ValueError(f"`{flag}` {folder} lacks {', '.join(missing)}; make them with "
                             f"`fedsim flower certs {folder}`")
        return cls(*paths)


def write_certificates(folder, hosts=(), *, days: int = 365, force: bool = False) -> Certificates:
    """Write a new certificate authority and a server certificate it signs to ``folder``.

    Parameters
    ----------
    folder : str or Path
        Created if missing.
    hosts : iterable of str
        Names or IP addresses the server certificate names beside 127.0.0.1 and localhost.
    days : int, default 365
        Validity.
    force : bool, default False
        Replace certificates already in ``folder``; otherwise they are refused.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not isinstance(days, int) or days < 1:
        raise ValueError(f"`--days` must be a whole number of days >= 1, got {days}")
    folder = Path(folder)
    present = [name for name in FILES if (folder / name).exists()]
    if present and not force:
        raise ValueError(f"{folder} already holds {', '.join(present)}; give a new folder, or --force to replace them")
    names = ["127.0.0.1", "localhost", *hosts]
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedsim federation CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
              .issuer_name(ca_name).public_key(server_key.public_key())
              .serial_number(x509.random_serial_number()).not_valid_before(now)
              .not_valid_after(now + datetime.timedelta(days=days))
              .add_extension(x509.SubjectAlternativeName([_general_name(name) for name in dict.fromkeys(names)]),
                             critical=False)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    key_bytes = server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    for name, payload, mode in zip(FILES, (ca.public_bytes(pem), server.public_bytes(pem), key_bytes),
                                   (0o644, 0o644, 0o600)):  # the certificates are public, the key the owner's alone
        write_atomic(folder / name, payload, mode)
    return Certificates.in_folder(folder)


@dataclass(frozen=True)
class NodeKey:
    """A SuperNode's key pair: the private key stays on the node, the public key is registered."""

    private: Path
    public: Path


def write_node_key(folder, name: str = "supernode", *, force: bool = False) -> NodeKey:
    """Write a new SuperNode key pair, ``NAME.key`` (private, owner-only) and ``NAME.pub``, to ``folder``.

    The key is on SECP384R1, both halves in OpenSSH format, as Flower's SuperNode
    authentication reads them (``flower-supernode --auth-supernode-private-key NAME.key``,
    ``flwr supernode register NAME.pub``).

    Parameters
    ----------
    folder : str or Path
        Created if missing.
    name : str, default "supernode"
        The files' stem.
    force : bool, default False
        Replace a key pair already there; otherwise it is refused.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder = Path(folder)
    key = NodeKey(folder / f"{name}.key", folder / f"{name}.pub")
    present = [path.name for path in (key.private, key.public) if path.exists()]
    if present and not force:
        raise ValueError(f"{folder} already holds {', '.join(present)}; give a new folder, or --force to replace them")
    private = ec.generate_private_key(ec.SECP384R1())
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(key.private, private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                                    serialization.NoEncryption()), 0o600)
    write_atomic(key.public, private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                               serialization.PublicFormat.OpenSSH) + b"\n", 0o644)
    return key


def _general_name(name: str):
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)
