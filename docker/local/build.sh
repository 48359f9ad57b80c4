#!/bin/bash
# Images made from Debian's packages, PyPI and Maven, for a machine that reaches package
# registries but no container registry:
#   docker/local/build.sh ENGINE platform   the bases of docker/Dockerfile; prints its
#                                           --build-arg flags
#   docker/local/build.sh ENGINE services   stand-ins for compose's third-party images;
#                                           prints compose's image variables (NAME=image)
# ENGINE: podman. Each image is built once and again only when its folder here changes (a
# label holds the folder's hash); builds mount the machine's CA bundle and Maven cache.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
engine="${1:?usage: build.sh ENGINE platform|services}"
what="${2:?usage: build.sh ENGINE platform|services}"
suite=bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
prefix=localhost/s3tm-local
bundle=/etc/ssl/certs/ca-certificates.crt
m2="${MAVEN_REPO:-${HOME}/.m2}"

say() { echo "local images: $*" >&2; }
label_of() { "${engine}" image inspect --format '{{ index .Labels "s3tm.source" }}' "$1" 2>/dev/null || true; }

# debian:bookworm from mmdebstrap: the one image that is not a build
debian="${prefix}/debian:${suite}"
debian_source="mmdebstrap minbase ${suite} ca-certificates"
if [ "$(label_of "${debian}")" != "${debian_source}" ]; then
  command -v mmdebstrap >/dev/null || { say "mmdebstrap is needed (apt-get install mmdebstrap)"; exit 1; }
  say "making ${debian} with mmdebstrap"
  tarball="$(mktemp --suffix=.tar)"
  trap 'rm -f "${tarball}"' EXIT
  mmdebstrap --quiet --variant=minbase --include=ca-certificates "${suite}" "${tarball}" "${mirror}"
  "${engine}" import --quiet --change 'CMD ["/bin/bash"]' \
    --change "LABEL s3tm.source=\"${debian_source}\"" "${tarball}" "${debian}" >/dev/null
fi

# build NAME TAG [CONTEXT] [ARGS...]: docker/local/NAME/Containerfile on debian:bookworm
build() {
  local name="$1" tag="$2" context="${3:-${here}/$1}"
  shift 3 || shift $#
  local hash image="${prefix}/${name}:${tag}"
  hash="$( (cat "${here}/${name}"/* "${here}/${name}"/*/* 2>/dev/null; echo "$*") | sha256sum | cut -c1-16)"
  if [ "$(label_of "${image}")" != "${hash}" ]; then
    say "building ${image}"
    local mounts=()
    [ -f "${bundle}" ] && mounts+=(--volume "${bundle}:${bundle}:ro")
    "${engine}" build --quiet --label "s3tm.source=${hash}" "${mounts[@]}" \
      --build-arg "DEBIAN_IMAGE=${debian}" --build-arg "PYTHON_IMAGE=${prefix}/python:3.11-${suite}" \
      --build-arg "JDK_IMAGE=${prefix}/jdk:17-${suite}" "$@" \
      --file "${here}/${name}/Containerfile" --tag "${image}" "${context}" >/dev/null
  fi
  echo "${image}"
}

python_image="$(build python 3.11-${suite})"
jdk_image="$(build jdk 17-${suite})"
case "${what}" in
  platform)
    echo "--build-arg PYTHON_IMAGE=${python_image} --build-arg JAVA_IMAGE=${jdk_image}" \
         "--build-arg MAVEN_IMAGE=${jdk_image}"
    ;;
  services)
    [ -d "${m2}/repository" ] || { say "no Maven cache at ${m2}: run make setup first"; exit 1; }
    # moto's version is uv.lock's (the tests' S3 server)
    moto_version="$(awk '/^name = "moto"$/ { getline; gsub(/"/, "", $3); print $3; exit }' "${repo}/uv.lock")"
    [ -n "${moto_version}" ] || { say "uv.lock locks no moto"; exit 1; }
    moto="moto[server]==${moto_version}"
    postgres="$(build postgres 15-${suite})"
    s3="$(build s3 moto "" --build-arg "MOTO_REQUIREMENT=${moto}")"
    kafka="$(build kafka maven "${repo}/docker" --build-arg MAVEN_FLAGS=--offline \
      --volume "${m2}:/root/.m2:ro")"
    prometheus="$(build prometheus "${suite}")"
    # statsd_exporter from its Go module, at the version of compose's default image
    statsd_version="$(sed -n 's|.*STATSD_EXPORTER_IMAGE:-docker.io/prom/statsd-exporter:\(v[0-9.]*\)}.*|\1|p' \
      "${repo}/docker/compose.yaml")"
    [ -n "${statsd_version}" ] || { say "compose.yaml names no prom/statsd-exporter version"; exit 1; }
    statsd_context="$(mktemp -d)"
    cp "${here}/statsd-exporter/Containerfile" "${statsd_context}/"
    command -v go >/dev/null || { say "Go is needed to build statsd_exporter"; exit 1; }
    statsd_tag="${statsd_version#v}"
    # (Go's build cache makes this quick after the first time)
    (cd "${statsd_context}" && CGO_ENABLED=0 GOBIN="${statsd_context}" GOFLAGS=-trimpath \
      go install "github.com/prometheus/statsd_exporter@${statsd_version}")
    statsd="$(build statsd-exporter "${statsd_tag}" "${statsd_context}")"
    rm -rf "${statsd_context}"
    printf '%s\n' "POSTGRES_IMAGE=${postgres}" "MINIO_IMAGE=${s3}" "MC_IMAGE=${s3}" \
      "KAFKA_IMAGE=${kafka}" "PROMETHEUS_IMAGE=${prometheus}" "STATSD_EXPORTER_IMAGE=${statsd}"
    ;;
  *) say "build.sh ENGINE platform|services, not '${what}'"; exit 2 ;;
esac
