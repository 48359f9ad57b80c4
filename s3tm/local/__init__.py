"""The production topology as local processes (no Docker): a Kafka broker from its jars."""
