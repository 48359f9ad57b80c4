"""A one-node Kubernetes cluster on this machine, from the programs
``build-kubernetes.sh --node`` builds: etcd (Debian's), kube-apiserver, the controller
manager, the scheduler, kubelet on Debian's containerd with runc and the CNI bridge plugin,
kube-proxy (iptables) and CoreDNS as a pod. Pods get their images from containerd's store:
what podman built here is imported (no registry is reachable).

Root only: kubelet, containerd and kube-proxy set up cgroups, mounts and iptables rules.
Everything lives in one folder (state, logs, certificates) and under
``/run/s3tm-node``; :meth:`OneNode.stop` kills every pod's containers, unmounts what kubelet
mounted and removes kube-proxy's rules and the bridge.

What this machine needed, found by running it:
- containerd's ``restrict_oom_score_adj``: the sandbox may not lower a process's OOM score
  (runc failed with "can't get final child's PID from pipe" on -998);
- ``--feature-gates=WatchList=false`` on the API server: Debian's etcd 3.4.23 has no
  RequestWatchProgress, so streaming lists (Spark's Kubernetes client uses them to watch
  its executor pods) failed with a 500;
- ``--kubelet-preferred-address-types=InternalIP``: the node's name does not resolve.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
BUILD = HERE / "build-kubernetes.sh"
NODE_NAME = "s3tm-node"
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
API_SERVICE_IP = "10.96.0.1"
DNS_SERVICE_IP = "10.96.0.10"
MIN_FREE_GIB = 15
BRIDGE = "s3tmk8s0"
RUN = Path("/run/s3tm-node")
CNI_BIN = Path("/usr/lib/cni")
# what pods' sandboxes and the cluster's DNS run: made here from the programs built
PAUSE_IMAGE = "localhost/s3tm-local/pause:3.10"
COREDNS_IMAGE = "localhost/s3tm-local/coredns:1.12.4"
NEEDED = {
    "etcd": "etcd-server",
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "conntrack": "conntrack",
    "openssl": "openssl",
    "podman": "podman",
    "gcc": "gcc",
}


# kubelet's tries to start, and how long it must run to count as started
KUBELET_STARTS = 4
KUBELET_SETTLE_S = 5.0


class ClusterError(RuntimeError):
    """A step of the cluster failed; the message says which and where its log is."""


def say(text: str) -> None:
    print(text, flush=True)


def wait_until(what: str, ready: Callable[[], bool], timeout_s: float, poll_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise ClusterError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(poll_s)


def host_address() -> str:
    """The address pods reach this machine at (the API server advertises it): the source
    of the default route, else the first global IPv4 address."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("198.51.100.1", 9))  # no packet is sent: the route is looked up
        return str(probe.getsockname()[0])
    listed = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                            capture_output=True, text=True, check=False).stdout.split()  # fmt: skip
    if "inet" not in listed:
        raise ClusterError("no IPv4 address for the API server to advertise")
    return listed[listed.index("inet") + 1].split("/")[0]


def missing_programs() -> list[str]:
    missing = sorted({pkg for cmd, pkg in NEEDED.items() if shutil.which(cmd) is None})
    if not (CNI_BIN / "bridge").exists():
        missing.append("containernetworking-plugins")
    return missing


@dataclass
class OneNode:
    """The cluster's processes in ``folder``; ``kubectl(...)`` and ``helm(...)`` run against
    it with the admin's kubeconfig."""

    folder: Path
    bin: Path = field(init=False)
    kubeconfig: Path = field(init=False)
    audit_log: Path = field(init=False)
    address: str = field(init=False)
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    # -- start ------------------------------------------------------------------------------
    def start(self) -> OneNode:
        if os.geteuid() != 0:
            raise ClusterError("the one-node cluster needs root (kubelet, containerd, iptables)")
        if missing := missing_programs():
            raise ClusterError(f"missing Debian packages: apt-get install {' '.join(missing)}")
        built = subprocess.run([str(BUILD), "--node"], capture_output=True, text=True, check=False)
        if built.returncode != 0:
            raise ClusterError(f"building Kubernetes failed: {built.stderr[-3000:]}")
        self.bin = Path(built.stdout.strip().splitlines()[-1])
        self.folder.mkdir(parents=True, exist_ok=True)
        free_gib = shutil.disk_usage(self.folder).free / 2**30
        if free_gib < MIN_FREE_GIB:
            # the images take about 8 GiB unpacked; kubelet taints a node short of disk
            # (disk-pressure) and schedules nothing on it
            raise ClusterError(
                f"{free_gib:.0f} GiB free under {self.folder}: the cluster needs {MIN_FREE_GIB}"
            )
        self.address = host_address()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        self._stop_leftovers()
        # each start is a new cluster: a run after a failed one starts from nothing, not on
        # the objects it left in etcd
        shutil.rmtree(self.folder / "etcd", ignore_errors=True)
        token = self._certificates()
        self._spawn(
            "etcd",
            [
                "etcd",
                "--data-dir",
                str(self.folder / "etcd"),
                "--name",
                NODE_NAME,
                "--listen-client-urls",
                "http://127.0.0.1:2379",
                "--advertise-client-urls",
                "http://127.0.0.1:2379",
                "--listen-peer-urls",
                "http://127.0.0.1:2380",
                "--initial-advertise-peer-urls",
                "http://127.0.0.1:2380",
                "--initial-cluster",
                f"{NODE_NAME}=http://127.0.0.1:2380",
            ],
        )
        wait_until("etcd", lambda: _answers("127.0.0.1", 2379), 60, 0.5)
        pki = self.folder / "pki"
        # every request a service account makes, at metadata level: which rights the
        # platform's accounts use (k8s_demo.py prints them beside what their Roles grant)
        self.audit_log = self.folder / "logs" / "audit.jsonl"
        self.audit_log.unlink(missing_ok=True)  # this cluster's requests only
        policy = self.folder / "audit-policy.yaml"
        policy.write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
            "rules:\n  - level: Metadata\n    userGroups: [system:serviceaccounts]\n"
            "  - level: None\n"
        )
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                "--etcd-servers=http://127.0.0.1:2379",
                "--bind-address=0.0.0.0",
                f"--advertise-address={self.address}",
                "--secure-port=6443",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--kubelet-preferred-address-types=InternalIP",
                "--feature-gates=WatchList=false",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
            ],
        )
        self.kubeconfig = self.folder / "kubeconfig"
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: s3tm-node\n"
            f"clusters: [{{name: s3tm-node, cluster: {{server: 'https://{self.address}:6443', "
            f"certificate-authority: '{pki / 'ca.crt'}'}}}}]\n"
            f"users: [{{name: admin, user: {{token: '{token}'}}}}]\n"
            "contexts: [{name: s3tm-node, context: {cluster: s3tm-node, user: admin}}]\n"
        )
        self.kubeconfig.chmod(0o600)
        wait_until(
            "kube-apiserver",
            lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
            120,
        )
        kubeconfig = f"--kubeconfig={self.kubeconfig}"
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                kubeconfig,
                "--leader-elect=false",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--bind-address=127.0.0.1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(self.bin / "kube-scheduler"),
                kubeconfig,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
            ],
        )
        self._containerd()
        self._kubelet()
        subprocess.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"], check=True)
        self._spawn(
            "kube-proxy",
            [
                str(self.bin / "kube-proxy"),
                kubeconfig,
                "--proxy-mode=iptables",
                f"--cluster-cidr={POD_CIDR}",
                f"--hostname-override={NODE_NAME}",
            ],
        )
        wait_until(f"node {NODE_NAME} Ready", self._node_ready, 180)
        return self

    def _certificates(self) -> str:
        """A CA, the API server's certificate (for every name pods and this machine use),
        the service-account key pair and the admin's token."""
        pki = self.folder / "pki"
        pki.mkdir(exist_ok=True)
        names = [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "localhost",
        ]
        ips = [API_SERVICE_IP, "127.0.0.1", self.address]
        (pki / "san.cnf").write_text(
            "[req]\ndistinguished_name=dn\n[dn]\n[ext]\nsubjectAltName="
            + ",".join([f"DNS:{n}" for n in names] + [f"IP:{ip}" for ip in ips])
            + "\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
        )

        def openssl(*argv: str) -> None:
            subprocess.run(["openssl", *argv], cwd=pki, check=True, capture_output=True)

        openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "30",
            "-subj",
            "/CN=s3tm-node-ca",
        )
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "apiserver.key",
            "-out",
            "apiserver.csr",
            "-subj",
            "/CN=kube-apiserver",
        )
        openssl(
            "x509",
            "-req",
            "-in",
            "apiserver.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "apiserver.crt",
            "-days",
            "30",
            "-extfile",
            "san.cnf",
            "-extensions",
            "ext",
        )
        openssl("genrsa", "-out", "sa.key", "2048")
        openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        token = secrets.token_hex(16)
        (pki / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
        return token

    def _containerd(self) -> None:
        config = self.folder / "containerd"
        config.mkdir(exist_ok=True)
        spec = json.loads(
            subprocess.run(
                ["ctr", "oci", "spec"], capture_output=True, text=True, check=True
            ).stdout
        )
        (config / "base-spec.json").write_text(json.dumps(spec))
        cni = config / "cni"
        cni.mkdir(exist_ok=True)
        (cni / "10-s3tm.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "s3tm-node",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": True,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": POD_CIDR}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                }
            )
        )
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        (config / "config.toml").write_text(f"""version = 2
root = "{config / "root"}"
state = "{RUN / "containerd"}"
[grpc]
  address = "{RUN / "containerd.sock"}"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "{config / "base-spec.json"}"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{shutil.which("runc")}"
  [{cri}.cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni}"
""")
        RUN.mkdir(parents=True, exist_ok=True)
        self._spawn("containerd", ["containerd", "--config", str(config / "config.toml")])
        wait_until("containerd", lambda: self.ctr("version", check=False).returncode == 0, 60, 0.5)

    def _kubelet(self) -> None:
        config = self.folder / "kubelet.yaml"
        # Images are imported, never pulled: image garbage collection would delete them.
        config.write_text(f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: unix://{RUN / "containerd.sock"}
authentication: {{anonymous: {{enabled: true}}, webhook: {{enabled: false}}}}
authorization: {{mode: AlwaysAllow}}
clusterDNS: [{DNS_SERVICE_IP}]
clusterDomain: cluster.local
failSwapOn: false
evictionHard:
  memory.available: "200Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
""")
        argv = [
            str(self.bin / "kubelet"),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={config}",
            f"--root-dir={self.folder / 'kubelet'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={self.address}",
        ]
        # containerd answers before its CRI service has recovered its state, and kubelet
        # exits on "server is not initialized yet" instead of waiting: started again
        for _ in range(KUBELET_STARTS):
            self._spawn("kubelet", argv)
            time.sleep(KUBELET_SETTLE_S)
            if self._processes["kubelet"].poll() is None:
                return
            say("  kubelet exited while starting (its log says why); starting it again")
        raise ClusterError(
            f"kubelet exited {KUBELET_STARTS} times while starting: {self.folder}/logs/kubelet.log"
        )

    def _node_ready(self) -> bool:
        done = self.kubectl(
            "get",
            "node",
            NODE_NAME,
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
            check=False,
        )
        return done.stdout.strip() == "True"

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = self.folder / "logs" / f"{name}.log"
        with log.open("ab") as out:
            self._processes[name] = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    # -- images and add-ons -----------------------------------------------------------------
    def import_images(self, images: Iterable[str]) -> None:
        """Copy podman's ``images`` into containerd's store (one archive: shared layers once)."""
        names = list(images)
        env = {**os.environ, "CONTAINERS_CONF": str(REPO / "docker/local/containers.conf")}
        save = subprocess.Popen(
            ["podman", "save", "-m", "--format", "docker-archive", *names],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        done = self.ctr("images", "import", "-", stdin=save.stdout, check=False)
        save.wait()
        if save.returncode != 0 or done.returncode != 0:
            raise ClusterError(f"importing {names}: {done.stderr[-2000:]}")

    def make_static_images(self) -> None:
        """The pause and CoreDNS images: one static program each, from ``bin``."""
        env = {**os.environ, "CONTAINERS_CONF": str(REPO / "docker/local/containers.conf")}
        for image, program in ((PAUSE_IMAGE, "pause"), (COREDNS_IMAGE, "coredns")):
            tar = self.folder / f"{program}.tar"
            subprocess.run(["tar", "-C", str(self.bin), "-cf", str(tar), program], check=True)
            subprocess.run(
                ["podman", "import", "--change", f'ENTRYPOINT ["/{program}"]', str(tar), image],
                check=True,
                capture_output=True,
                env=env,
            )
            tar.unlink()

    def install_dns(self) -> None:
        """CoreDNS as the cluster's DNS, from the Kubernetes release's own add-on manifest
        (its placeholders filled as the release's scripts fill them)."""
        module = subprocess.run(
            ["go", "mod", "download", "-json", "k8s.io/kubernetes@v1.34.2"],
            capture_output=True,
            text=True,
            check=True,
        )
        addon = Path(json.loads(module.stdout)["Dir"]) / "cluster/addons/dns/coredns"
        manifest = (addon / "coredns.yaml.base").read_text()
        for placeholder, value in {
            "__DNS__DOMAIN__": "cluster.local",
            "__DNS__SERVER__": DNS_SERVICE_IP,
            "__DNS__MEMORY__LIMIT__": "170Mi",
        }.items():
            manifest = manifest.replace(placeholder, value)
        manifest = manifest.replace("registry.k8s.io/coredns/coredns:v1.12.1", COREDNS_IMAGE)
        self.kubectl("apply", "--server-side", "-f", "-", input_text=manifest)
        self.kubectl(
            "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=180s"
        )

    # -- clients ----------------------------------------------------------------------------
    def kubectl(
        self, *argv: str, check: bool = True, input_text: str | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return self._run(
            [str(self.bin / "kubectl"), f"--kubeconfig={self.kubeconfig}", *argv],
            check,
            input_text,
            timeout,
        )

    def helm(self, *argv: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return self._run(
            [str(self.bin / "helm"), f"--kubeconfig={self.kubeconfig}", *argv], True, None, timeout
        )

    def ctr(
        self, *argv: str, check: bool = True, stdin: object = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["ctr", "--address", str(RUN / "containerd.sock"), "-n", "k8s.io", *argv],
            stdin=stdin,
            capture_output=True,
            text=True,
            check=False,
        )  # type: ignore[call-overload]
        if check and done.returncode != 0:
            raise ClusterError(f"ctr {' '.join(argv)}: {done.stderr[-2000:]}")
        return done  # type: ignore[no-any-return]

    @staticmethod
    def _run(
        argv: list[str], check: bool, input_text: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            argv, input=input_text, capture_output=True, text=True, check=False, timeout=timeout
        )
        if check and done.returncode != 0:
            raise ClusterError(f"{Path(argv[0]).name} {' '.join(argv[2:])}: {done.stderr[-3000:]}")
        return done

    # -- stop -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Every pod's containers killed, then the processes, kubelet's mounts, kube-proxy's
        rules and the bridge."""
        if "containerd" in self._processes:
            with contextlib.suppress(ClusterError, subprocess.SubprocessError):
                for task in self.ctr("tasks", "list", "-q", check=False).stdout.split():
                    self.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
        for process in reversed(self._processes.values()):
            process.terminate()
        for process in reversed(self._processes.values()):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes.clear()
        self._stop_leftovers()
        # the images imported into containerd and the pods' volumes: gigabytes no later run
        # reads (each imports the images again); the logs stay
        for data in (self.folder / "containerd" / "root", self.folder / "kubelet"):
            shutil.rmtree(data, ignore_errors=True)

    def _stop_leftovers(self) -> None:
        """What a cluster leaves behind it (this one's, or one killed before it stopped)."""
        # every process of a pod (kubelet's cgroups: /kubepods/...): a container whose shim
        # was killed keeps running without it
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError, ValueError):
                if proc.name.isdigit() and "/kubepods" in (proc / "cgroup").read_text():
                    os.kill(int(proc.name), 9)
        subprocess.run(
            ["pkill", "-9", "-f", "containerd-shim-runc-v2 -namespace k8s.io"], check=False
        )
        mounts = Path("/proc/mounts").read_text().split("\n")
        for line in sorted(mounts, key=len, reverse=True):
            parts = line.split()
            if len(parts) > 1 and parts[1].startswith((str(self.folder), str(RUN))):
                subprocess.run(["umount", "-l", parts[1]], check=False, capture_output=True)
        if hasattr(self, "bin") and (self.bin / "kube-proxy").exists():
            subprocess.run(
                [str(self.bin / "kube-proxy"), "--cleanup"], check=False, capture_output=True
            )
        subprocess.run(["ip", "link", "delete", BRIDGE], check=False, capture_output=True)
        _remove_masquerade_rules()
        for netns in Path("/var/run/netns").glob("cni-*"):
            subprocess.run(["ip", "netns", "delete", netns.name], check=False, capture_output=True)


def _remove_masquerade_rules() -> None:
    """The bridge plugin's NAT rules of pods whose sandbox was killed, not torn down: the
    POSTROUTING rules commented with the network's name, and the chains they jump to."""
    rules = subprocess.run(["iptables", "-t", "nat", "-S", "POSTROUTING"], capture_output=True,
                           text=True, check=False).stdout.splitlines()  # fmt: skip
    for rule in rules:
        if 's3tm-node\\"' not in rule or not rule.startswith("-A "):
            continue
        argv = shlex.split(rule)
        subprocess.run(["iptables", "-t", "nat", "-D", *argv[1:]], check=False, capture_output=True)
        chain = argv[argv.index("-j") + 1]
        for action in ("-F", "-X"):
            subprocess.run(
                ["iptables", "-t", "nat", action, chain], check=False, capture_output=True
            )


def _answers(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False
