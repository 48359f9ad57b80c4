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
    exec "$@"
    ;;
esac
