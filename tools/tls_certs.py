"""A throwaway certificate authority and certificates, made with the `openssl` command: what
the TLS tests, the `tls` bench section and the security guide's walkthrough run against.

Owns `make_certs(directory)`: a CA (ca.crt, ca.key), a server certificate for localhost and
127.0.0.1 (server.crt, server.key; also server-enc.key, the same key under the passphrase
PASSPHRASE), a client certificate (client.crt, client.key), a certificate from another CA
(stranger.crt, stranger.key: signed by stranger-ca.crt) and an expired one (expired.crt,
expired.key). EC P-256 keys: made in a few milliseconds each. Must not touch: anything outside
`directory`.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from streamkeep.tools import temporaries

__all__ = ["PASSPHRASE", "Certs", "make_certs"]

PASSPHRASE = "s3cret-key-pass"
_DAYS = "3650"


@dataclass(frozen=True)
class Certs:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)

    @property
    def ca(self) -> str:
        return self.path("ca.crt")

    def server_settings(self) -> dict[str, str]:
        """The settings a TLS server needs (tls-auth-clients left at its default, yes)."""
        return {"tls-cert-file": self.path("server.crt"), "tls-key-file": self.path("server.key"),
                "tls-ca-cert-file": self.ca}


def _run(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   **temporaries.child_options())


def _key(directory: Path, name: str) -> None:
    _run(directory, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-out", name)


def _ca(directory: Path, name: str, subject: str) -> None:
    _key(directory, f"{name}.key")
    _run(directory, "req", "-x509", "-new", "-key", f"{name}.key", "-sha256", "-days", _DAYS,
         "-subj", subject, "-out", f"{name}.crt")


def _signed(directory: Path, name: str, ca: str, subject: str, extensions: str,
            days: str = _DAYS) -> None:
    _key(directory, f"{name}.key")
    _run(directory, "req", "-new", "-key", f"{name}.key", "-subj", subject, "-out",
         f"{name}.csr")
    (directory / f"{name}.ext").write_text(extensions)
    _run(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey",
         f"{ca}.key", "-CAcreateserial", "-sha256", "-days", days, "-extfile", f"{name}.ext",
         "-out", f"{name}.crt")
    (directory / f"{name}.csr").unlink()
    (directory / f"{name}.ext").unlink()


def _expired(directory: Path) -> None:
    """A certificate valid for one day, a year ago: `openssl ca` takes explicit dates."""
    _key(directory, "expired.key")
    _run(directory, "req", "-new", "-key", "expired.key", "-subj", "/CN=localhost", "-out",
         "expired.csr")
    (directory / "index.txt").write_text("")
    (directory / "ca.cnf").write_text(
        "[ca]\ndefault_ca = throwaway\n[throwaway]\ndatabase = index.txt\n"
        "new_certs_dir = .\nserial = ca.srl\ndefault_md = sha256\npolicy = any\n"
        "[any]\ncommonName = supplied\n")
    _run(directory, "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.crt", "-keyfile",
         "ca.key", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-in",
         "expired.csr", "-out", "expired.crt", "-notext")
    for leftover in ("expired.csr", "index.txt", "index.txt.attr", "index.txt.old", "ca.cnf",
                     "ca.srl.old"):
        (directory / leftover).unlink(missing_ok=True)
    for pem in directory.glob("[0-9A-F]*.pem"):  # (openssl ca's copy, named by serial)
        pem.unlink()


def make_certs(directory: str | os.PathLike[str]) -> Certs:
    """The CA and certificates listed above, in `directory` (made if missing)."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    _ca(path, "ca", "/O=streamkeep test/CN=streamkeep test CA")
    _signed(path, "server", "ca", "/O=streamkeep test/CN=localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n"
            "extendedKeyUsage=serverAuth,clientAuth\n")
    _run(path, "pkey", "-in", "server.key", "-aes256", "-passout", f"pass:{PASSPHRASE}",
         "-out", "server-enc.key")
    _signed(path, "client", "ca", "/O=streamkeep test/CN=client",
            "extendedKeyUsage=clientAuth\n")
    _ca(path, "stranger-ca", "/O=elsewhere/CN=another CA")
    _signed(path, "stranger", "stranger-ca", "/O=elsewhere/CN=localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _expired(path)
    for key in path.glob("*.key"):
        key.chmod(0o600)
    return Certs(path)
