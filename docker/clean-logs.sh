#!/bin/bash
# The Airflow chart's log groomer sidecars run `bash /clean-logs`: every
# AIRFLOW__LOG_CLEANUP_FREQUENCY_MINUTES (15), delete the log files under Airflow's logs
# folder older than AIRFLOW__LOG_RETENTION_DAYS (15) and the folders left empty. The folder
# is where Airflow writes them: AIRFLOW__LOGGING__BASE_LOG_FOLDER (the image sets
# /opt/s3tm/logs/airflow), else Airflow's default under its home.
set -euo pipefail

readonly logs="${AIRFLOW__LOGGING__BASE_LOG_FOLDER:-${AIRFLOW_HOME:-/opt/airflow}/logs}"
readonly retention_days="${AIRFLOW__LOG_RETENTION_DAYS:-15}"
readonly every_minutes="${AIRFLOW__LOG_CLEANUP_FREQUENCY_MINUTES:-15}"

while true; do
  if [ -d "${logs}" ]; then
    echo "clean-logs: deleting files under ${logs} older than ${retention_days} days"
    find "${logs}" -type f -mtime +"${retention_days}" -delete
    find "${logs}" -mindepth 1 -type d -empty -delete
  fi
  sleep "$((every_minutes * 60))"
done
