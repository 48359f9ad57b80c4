#!/bin/bash
# Builds kube-apiserver and kubectl from the Kubernetes module on the Go module proxy, once
# per machine (cached in ${S3TM_K8S_CACHE:-$HOME/.cache/s3tm-k8s}/VERSION): `make k8s-check`
# runs the server on etcd and talks to it with the kubectl of the same release.
# The module zip leaves out the staging folders, so the build uses the published k8s.io/*
# modules of the same release instead of the `./staging/src/...` replaces.
#   infra/k8s/local/build-apiserver.sh [VERSION]      prints the folder of both binaries
set -euo pipefail
version="${1:-v1.34.2}"
cache="${S3TM_K8S_CACHE:-${HOME}/.cache/s3tm-k8s}"
bin="${cache}/${version}"
if [ -x "${bin}/kube-apiserver" ] && [ -x "${bin}/kubectl" ]; then echo "${bin}"; exit 0; fi
command -v go >/dev/null || { echo "build-apiserver: Go is needed" >&2; exit 1; }
echo "build-apiserver: building kube-apiserver and kubectl ${version} (once per machine; 10-20 minutes on 2 cores)" >&2
module="$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
[ -d "${module}" ] || { echo "build-apiserver: could not download k8s.io/kubernetes@${version}" >&2; exit 1; }
work="$(mktemp -d)"
trap 'chmod -R u+w "${work}"; rm -rf "${work}"' EXIT
cp -r "${module}/." "${work}/src"
chmod -R u+w "${work}/src"
cd "${work}/src"
rm -rf vendor go.work go.work.sum
published="v0${version#v1}"   # k8s.io/kubernetes v1.34.2 <-> k8s.io/api v0.34.2
sed -i -e '/=> \.\/staging\/src\/k8s\.io\//d' \
       -e "s#^\(\s*k8s\.io/[a-z0-9-]*\) v0\.0\.0\$#\1 ${published}#" go.mod
mkdir -p "${work}/out" "${bin}"
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "${work}/out/" ./cmd/kube-apiserver ./cmd/kubectl
mv "${work}/out/kube-apiserver" "${work}/out/kubectl" "${bin}/"
echo "${bin}"
