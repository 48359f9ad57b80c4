"""A Kafka broker (KRaft) from its Maven-resolved jars, for `s3tm kafka` where a user wants a
broker without containers (docker/compose.yaml runs the rest of the topology)."""
