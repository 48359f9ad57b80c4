"""A real Kubernetes API server on loopback for the manifests' tests: kube-apiserver built
here from its Go module (``infra/k8s/local/build-kubernetes.sh``) on Debian's etcd, with a
token file, a service-account key pair and RBAC, and the CRDs of tests/deploy/crds
installed. The kubectl of the same release, built beside it, talks to it through a
kubeconfig of its own.

No controller-manager or scheduler runs: the server accepts, validates, defaults and
stores objects (what a first ``kubectl apply`` meets); nothing reconciles them."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CRDS = Path(__file__).resolve().parent / "crds"
BUILD = REPO / "infra" / "k8s" / "local" / "build-kubernetes.sh"
START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait(what: str, ready, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{what} did not start (exit {process.poll()}): {tail}")
        time.sleep(0.5)


@dataclass
class KubeApiServer:
    """etcd and kube-apiserver in ``folder``; ``kubectl(...)`` runs against them."""

    folder: Path
    kubeconfig: Path = field(init=False)
    bin: Path = field(init=False)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> KubeApiServer:
        built = subprocess.run([str(BUILD)], capture_output=True, text=True, check=False)
        if built.returncode != 0:
            raise RuntimeError(f"building kube-apiserver failed: {built.stderr[-2000:]}")
        self.bin = Path(built.stdout.strip().splitlines()[-1])
        apiserver = str(self.bin / "kube-apiserver")
        etcd = shutil.which("etcd")
        if etcd is None:
            raise RuntimeError("etcd is needed (Debian: apt-get install etcd-server)")
        self.folder.mkdir(parents=True, exist_ok=True)
        client, peer, secure = _free_port(), _free_port(), _free_port()
        etcd_log = self.folder / "etcd.log"
        self._spawn(
            [etcd, "--data-dir", str(self.folder / "etcd"), "--name", "s3tm-check",
             "--listen-client-urls", f"http://127.0.0.1:{client}",
             "--advertise-client-urls", f"http://127.0.0.1:{client}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"s3tm-check=http://127.0.0.1:{peer}"],
            etcd_log,
        )  # fmt: skip
        _wait("etcd", lambda: _answers(client), self._processes[-1], etcd_log)
        token = secrets.token_hex(16)
        (self.folder / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
        key = self.folder / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True,
                       capture_output=True)  # fmt: skip
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out",
                        str(self.folder / "sa.pub")], check=True, capture_output=True)  # fmt: skip
        log = self.folder / "kube-apiserver.log"
        self._spawn(
            [apiserver, f"--etcd-servers=http://127.0.0.1:{client}",
             "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
             f"--secure-port={secure}", f"--cert-dir={self.folder / 'certs'}",
             f"--token-auth-file={self.folder / 'tokens.csv'}",
             "--authorization-mode=RBAC",
             f"--service-account-key-file={self.folder / 'sa.pub'}",
             f"--service-account-signing-key-file={key}",
             "--service-account-issuer=https://kubernetes.default.svc",
             "--service-cluster-ip-range=10.96.0.0/16"],
            log,
        )  # fmt: skip
        self.kubeconfig = self.folder / "kubeconfig"
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: check\n"
            f"clusters: [{{name: check, cluster: {{server: 'https://127.0.0.1:{secure}', "
            "insecure-skip-tls-verify: true}}]\n"
            f"users: [{{name: admin, user: {{token: '{token}'}}}}]\n"
            "contexts: [{name: check, context: {cluster: check, user: admin}}]\n"
        )
        _wait(
            "kube-apiserver",
            lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
            self._processes[-1],
            log,
        )
        self.kubectl("apply", "--server-side", "-f", str(CRDS))
        # `kubectl wait` errs on a CRD whose status has no conditions yet (just created):
        # asked again until every CRD is established
        _wait(
            "the CRDs",
            lambda: self.kubectl(
                "wait", "--for", "condition=established", "--timeout=10s", "crd", "--all",
                check=False,
            ).returncode == 0,
            self._processes[-1],
            log,
        )  # fmt: skip
        return self

    def _spawn(self, argv: list[str], log: Path) -> None:
        with log.open("wb") as out:
            self._processes.append(
                subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            )

    def kubectl(
        self, *argv: str, check: bool = True, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin / "kubectl"), "--kubeconfig", str(self.kubeconfig), *argv],
            input=input_text,
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            check=False,
            timeout=300,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(argv)}: {done.stderr[-3000:]}")
        return done

    def stop(self) -> None:
        for process in reversed(self._processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False
