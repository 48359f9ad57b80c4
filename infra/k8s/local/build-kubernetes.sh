#!/bin/bash
# Builds the Kubernetes programs the local checks run, from their Go modules (no release
# binaries or images are reachable here), once per machine: each lands in
# ${S3TM_K8S_CACHE:-$HOME/.cache/s3tm-k8s}/v1.34.2 and is not built again.
#   infra/k8s/local/build-kubernetes.sh             kube-apiserver and kubectl (make k8s-check)
#   infra/k8s/local/build-kubernetes.sh --node      and what a one-node cluster runs
#                                                   (make k8s-demo): kubelet, controller
#                                                   manager, scheduler, kube-proxy, CoreDNS,
#                                                   the Spark operator and helm
# Prints the folder of the programs on its last line.
set -euo pipefail
KUBERNETES=v1.34.2
COREDNS=v1.12.4
SPARK_OPERATOR=v2.3.0
HELM=v3.19.0
cache="${S3TM_K8S_CACHE:-${HOME}/.cache/s3tm-k8s}"
bin="${cache}/${KUBERNETES}"
mkdir -p "${bin}"
command -v go >/dev/null || { echo "build-kubernetes: Go is needed" >&2; exit 1; }
work="$(mktemp -d)"
trap 'chmod -R u+w "${work}"; rm -rf "${work}"' EXIT

# A writable copy of MODULE@VERSION's source in ${work}/src (module folders are read-only).
source_of() {
  local dir
  dir="$(go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -d "${dir}" ] || { echo "build-kubernetes: could not download $1" >&2; exit 1; }
  rm -rf "${work}/src"
  cp -r "${dir}/." "${work}/src"
  chmod -R u+w "${work}/src"
}

# build MODULE@VERSION 'go build flags' NAME=PACKAGE...: the programs not built yet
build() {
  local module="$1" flags="$2" missing=() spec
  shift 2
  for spec in "$@"; do [ -x "${bin}/${spec%%=*}" ] || missing+=("${spec}"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "build-kubernetes: building ${missing[*]%%=*} from ${module} (once per machine)" >&2
  source_of "${module}"
  if [ "${module%@*}" = k8s.io/kubernetes ]; then
    # The module zip leaves out the staging folders: the published k8s.io/* modules of
    # the same release instead of the `./staging/src/...` replaces.
    rm -rf "${work}/src/vendor" "${work}/src/go.work" "${work}/src/go.work.sum"
    sed -i -e '/=> \.\/staging\/src\/k8s\.io\//d' \
      -e "s#^\(\s*k8s\.io/[a-z0-9-]*\) v0\.0\.0\$#\1 v0${KUBERNETES#v1}#" "${work}/src/go.mod"
  fi
  for spec in "${missing[@]}"; do
    (cd "${work}/src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
      -ldflags "${flags}" -o "${work}/${spec%%=*}" "./${spec#*=}")
    mv "${work}/${spec%%=*}" "${bin}/"
  done
}

# the version the programs report (the API server's /version; kubectl's skew warning)
minor="${KUBERNETES#v1.}"; minor="${minor%%.*}"
version_flags="-X k8s.io/component-base/version.gitVersion=${KUBERNETES}"
version_flags+=" -X k8s.io/component-base/version.gitMajor=1"
version_flags+=" -X k8s.io/component-base/version.gitMinor=${minor}"
version_flags+=" -X k8s.io/component-base/version.gitTreeState=clean"
version_flags+=" -X k8s.io/client-go/pkg/version.gitVersion=${KUBERNETES}"

build "k8s.io/kubernetes@${KUBERNETES}" "${version_flags}" \
  kube-apiserver=cmd/kube-apiserver kubectl=cmd/kubectl
if [ "${1:-}" = --node ]; then
  build "k8s.io/kubernetes@${KUBERNETES}" "${version_flags}" \
    kubelet=cmd/kubelet kube-controller-manager=cmd/kube-controller-manager \
    kube-scheduler=cmd/kube-scheduler kube-proxy=cmd/kube-proxy
  build "github.com/coredns/coredns@${COREDNS}" "" coredns=.
  build "github.com/kubeflow/spark-operator/v2@${SPARK_OPERATOR}" "" spark-operator=cmd/operator
  build "helm.sh/helm/v3@${HELM}" "-X helm.sh/helm/v3/internal/version.version=${HELM}" \
    helm=cmd/helm
  # the pause program every pod's sandbox runs, as Kubernetes' own build compiles it
  if [ ! -x "${bin}/pause" ]; then
    source_of "k8s.io/kubernetes@${KUBERNETES}"
    gcc -Os -static -o "${bin}/pause" "${work}/src/build/pause/linux/pause.c"
  fi
fi
echo "${bin}"
