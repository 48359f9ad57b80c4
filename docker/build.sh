#!/bin/bash
# `make image`: builds docker/Dockerfile as ${S3TM_IMAGE}:${version} with podman (or Docker
# where podman is absent; ENGINE=docker to choose it).
#
# BASES=public uses the Dockerfile's default bases (python, eclipse-temurin and maven from
# a registry); BASES=local builds them from Debian's packages first (docker/local/build.sh)
# and resolves the jars from the Maven cache `make setup` filled; BASES=auto (the default)
# takes public when the registry answers within 30 s, local otherwise. A build on a machine
# whose TLS goes through a proxy of its own gets the machine's CA bundle mounted (podman).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "${repo}"
say() { echo "make image: $*" >&2; }

engine="${ENGINE:-}"
if [ -z "${engine}" ]; then
  if command -v podman >/dev/null; then engine=podman
  elif command -v docker >/dev/null; then engine=docker
  else say "neither podman nor docker is installed (apt-get install podman)"; exit 1; fi
fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
image="${S3TM_IMAGE:-s3tm/platform}:${version}"
bases="${BASES:-auto}"
public_probe="$(sed -n 's/^ARG PYTHON_IMAGE=//p' docker/Dockerfile)"

if [ "${bases}" = auto ]; then
  if timeout 30 "${engine}" pull --quiet "${public_probe}" >/dev/null 2>&1; then bases=public
  else
    bases=local
    say "no registry gave ${public_probe}: building the bases from Debian's packages"
  fi
fi

args=(--file docker/Dockerfile --ignorefile docker/Dockerfile.dockerignore --tag "${image}")
[ "${engine}" = docker ] && args=(--file docker/Dockerfile --tag "${image}")
case "${bases}" in
  public) ;;
  local)
    [ "${engine}" = podman ] || { say "BASES=local needs podman (its builds mount the Maven cache)"; exit 1; }
    read -r -a base_args <<< "$(docker/local/build.sh "${engine}" platform)"
    m2="${MAVEN_REPO:-${HOME}/.m2}"
    [ -d "${m2}/repository" ] || { say "no Maven cache at ${m2}: run make setup first"; exit 1; }
    args+=("${base_args[@]}" --build-arg MAVEN_FLAGS=--offline --volume "${m2}:/root/.m2:ro")
    ;;
  *) say "BASES must be auto, public or local, not '${bases}'"; exit 2 ;;
esac
bundle=/etc/ssl/certs/ca-certificates.crt
if [ "${engine}" = podman ] && [ -f "${bundle}" ]; then
  args+=(--volume "${bundle}:${bundle}:ro")
fi

say "building ${image} with ${engine} (${bases} bases)"
started=$(date +%s)
"${engine}" build "${args[@]}" .
size=$("${engine}" image inspect --format '{{.Size}}' "${image}")
say "built ${image} in $(( $(date +%s) - started ))s: $(( size / 1024 / 1024 )) MiB; what takes the space:"
"${engine}" run --rm "${image}" sh -c 'for path in /opt/s3tm/venv /opt/spark/jars/ \
  /opt/spark/jars/bundle-*.jar /opt/java/openjdk /usr; do du -sh "${path}"; done' | sed 's/^/  /' >&2
