"""Replay a corpus into Kafka: the posts topic the streaming matcher reads (compose and
Kubernetes deployments; a real firehose takes its place in production)."""
