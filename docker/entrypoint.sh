#!/bin/bash
# The platform image's entrypoint. Spark on Kubernetes (spark-submit k8s://, the Spark
# Operator) starts its pods with `driver ...` or `executor` and the variables below; every
# other command (compose's and the Airflow chart's) runs as given.
set -euo pipefail

spark_classpath() {
  local classpath="${SPARK_CLASSPATH:-}"
  # the submission's configuration (a mounted config map) first, then Spark's jars
  if [ -n "${SPARK_CONF_DIR:-}" ]; then classpath="${SPARK_CONF_DIR}:${classpath}"; fi
  printf '%s' "${classpath:+${classpath}:}${SPARK_HOME}/jars/*"
}

# Airflow's KubernetesExecutor names its task pods' image as a repository and a tag: the
# ones of S3TM_IMAGE (infra/k8s: the image of every pod, which one `images:` entry sets),
# unless they are set. An immutable reference (REPOSITORY@sha256:...) does not split into
# the two Airflow joins with ':': the task pods' template gets it as its image instead (a
# copy of the template in /tmp, which the executor then reads). An untagged name is said,
# and the two settings are the operator's.
worker_image() {
  local image="${S3TM_IMAGE:-}" tag template="${AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE:-}"
  [ -n "${image}" ] || return 0
  [ -z "${AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_REPOSITORY:-}" ] || return 0
  if [[ "${image}" == *@sha256:* && -f "${template}" ]]; then
    local copy="${TMPDIR:-/tmp}/s3tm-pod-template.yaml"
    python - "${template}" "${copy}" "${image}" <<'EOF'
import sys

import yaml

source, target, image = sys.argv[1:]
with open(source) as text:
    pod = yaml.safe_load(text)
pod["spec"]["containers"][0]["image"] = image
with open(target, "w") as text:
    yaml.safe_dump(pod, text, sort_keys=False)
EOF
    export AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE="${copy}"
    return 0
  fi
  tag="${image##*:}"
  if [[ "${image}" != *:* || "${image}" == *@* || "${tag}" == */* ]]; then
    echo "entrypoint: S3TM_IMAGE=${image} is not REPOSITORY:TAG or REPOSITORY@sha256:DIGEST with a pod template: set AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_REPOSITORY and _TAG for the task pods' image" >&2
    return 0
  fi
  export AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_REPOSITORY="${image%:*}"
  export AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_TAG="${tag}"
}

# Airflow's task logs with remote logging on (infra/k8s: the KubernetesExecutor deletes a
# task's pod, and its disk with it) go to the lakehouse's object store,
# $S3TM_LAKEHOUSE/airflow-logs, unless the operator names a folder: the bucket is declared
# once. A lakehouse that is not on an object store leaves no folder to derive: said, exit 1.
remote_log_folder() {
  local remote="${AIRFLOW__LOGGING__REMOTE_LOGGING:-false}" lakehouse="${S3TM_LAKEHOUSE:-}"
  case "${remote,,}" in true | t | 1) ;; *) return 0 ;; esac
  [ -z "${AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER:-}" ] || return 0
  case "${lakehouse}" in
    s3://* | s3a://*)
      lakehouse="s3://${lakehouse#*://}"
      export AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER="${lakehouse%/}/airflow-logs"
      ;;
    *)
      echo "entrypoint: AIRFLOW__LOGGING__REMOTE_LOGGING is on and S3TM_LAKEHOUSE=${lakehouse:-(unset)} is not s3://: set AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER" >&2
      return 1
      ;;
  esac
}

case "${1:-}" in
  driver)
    shift
    exec "${SPARK_HOME}/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    # the executor's JVM options arrive as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order
    java_opts=()
    while IFS= read -r option; do java_opts+=("${option}"); done < <(
      env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
    # Spark reads its RPC secret from spark.authenticate.secret.file only under a k8s://
    # master, and those first options do not name the master (the driver's settings come
    # later, over the authenticated connection): the executor is told it runs on Kubernetes
    java_opts+=("-Dspark.master=k8s://https://${KUBERNETES_SERVICE_HOST:-kubernetes.default.svc}:${KUBERNETES_SERVICE_PORT:-443}")
    exec "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
      "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}" \
      -cp "$(spark_classpath)" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-${HOSTNAME:-executor}}"
    ;;
  *)
    worker_image
    remote_log_folder
    exec "$@"
    ;;
esac
