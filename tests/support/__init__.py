"""What the tests start beside the code under test: an S3 server, PostgreSQL, Prometheus,
a Spark standalone cluster (in a deployment, docker/compose.yaml starts these)."""
