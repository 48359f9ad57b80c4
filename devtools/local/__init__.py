"""Services on this machine without containers: a Kafka broker (KRaft) from its
Maven-resolved jars (`s3tm kafka`), Airflow's processes (`s3tm airflow`, ``airflow``) and
the process groups they run in (docker/compose.yaml runs the rest of the topology)."""
