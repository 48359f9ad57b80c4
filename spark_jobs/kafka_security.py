"""How the platform's Kafka clients reach a broker that wants TLS and SASL: the stream's
source and the ingest (Spark's Kafka reader, a JVM client), the ingest's offset lookup and
``s3tm produce`` (kafka-python). One set of settings, from the deployment's environment as
``KAFKA_BOOTSTRAP`` is (compose's .env, Kubernetes' s3tm-config and a Secret), spelled for
each client here.

- ``KAFKA_SECURITY_PROTOCOL``: ``PLAINTEXT`` (the default), ``SSL``, ``SASL_SSL`` or
  ``SASL_PLAINTEXT``;
- ``KAFKA_SASL_MECHANISM``: ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` (SASL only);
- ``KAFKA_SASL_USERNAME``, ``KAFKA_SASL_PASSWORD``: the client's credentials (SASL only;
  the password from a Secret, never a file of the repository or a command line);
- ``KAFKA_SSL_CA_FILE``: a PEM file of the CA that signed the brokers' certificates (TLS;
  unset: the system's trust store). Spark's executors open it too: the same path on every
  pod of the image (a mounted Secret).

The brokers' certificates are checked against their host names (both clients' default).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InvalidArgumentError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# each SASL mechanism's JAAS login module (Kafka's own clients)
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
ENV_PROTOCOL = "KAFKA_SECURITY_PROTOCOL"
ENV_MECHANISM = "KAFKA_SASL_MECHANISM"
ENV_USERNAME = "KAFKA_SASL_USERNAME"
ENV_PASSWORD = "KAFKA_SASL_PASSWORD"
ENV_CA_FILE = "KAFKA_SSL_CA_FILE"


# the broker and the posts topic: the deployment names them once (compose's .env,
# Kubernetes' s3tm-config), the ingest, the stream and the DAGs default to them
ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP"
ENV_TOPIC = "POSTS_TOPIC"
DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_TOPIC = "posts"


def deployment_bootstrap() -> str:
    """``$KAFKA_BOOTSTRAP``, else ``localhost:9092`` (``s3tm kafka``'s broker)."""
    return os.environ.get(ENV_BOOTSTRAP) or DEFAULT_BOOTSTRAP


def deployment_topic() -> str:
    """``$POSTS_TOPIC``, else ``posts``."""
    return os.environ.get(ENV_TOPIC) or DEFAULT_TOPIC


def jaas_quoted(text: str) -> str:
    """A JAAS option value: double-quoted, its backslashes and quotes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class KafkaSecurity:
    """A Kafka client's security settings (validated: a SASL protocol needs a mechanism and
    credentials, a CA file must exist). The default is a plaintext broker."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise InvalidArgumentError(
                f"{ENV_PROTOCOL}={self.protocol!r}: one of {', '.join(PROTOCOLS)}"
            )
        if self.sasl:
            if self.sasl_mechanism not in LOGIN_MODULES:
                raise InvalidArgumentError(
                    f"{ENV_PROTOCOL}={self.protocol} needs {ENV_MECHANISM}, one of "
                    f"{', '.join(LOGIN_MODULES)} (got {self.sasl_mechanism!r})"
                )
            if not self.username or not self.password:
                raise InvalidArgumentError(
                    f"{ENV_PROTOCOL}={self.protocol} needs {ENV_USERNAME} and {ENV_PASSWORD}"
                )
        elif self.sasl_mechanism or self.username or self.password:
            raise InvalidArgumentError(
                f"SASL settings are given but {ENV_PROTOCOL}={self.protocol} does not use "
                "SASL: set it to SASL_SSL (or SASL_PLAINTEXT)"
            )
        if self.ca_file is not None:
            if not self.tls:
                raise InvalidArgumentError(
                    f"{ENV_CA_FILE} is given but {ENV_PROTOCOL}={self.protocol} uses no TLS"
                )
            if not Path(self.ca_file).is_file():
                raise InvalidArgumentError(f"{ENV_CA_FILE}={self.ca_file}: no such file")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
        """The settings of the environment's ``KAFKA_*`` variables (empty ones unset)."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            return env.get(name) or None

        return cls(
            protocol=(get(ENV_PROTOCOL) or "PLAINTEXT").upper(),
            sasl_mechanism=(m.upper() if (m := get(ENV_MECHANISM)) else None),
            username=get(ENV_USERNAME),
            password=get(ENV_PASSWORD),
            ca_file=get(ENV_CA_FILE),
        )

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def spark_options(self) -> dict[str, str]:
        """Options of Spark's Kafka source (``kafka.``-prefixed Java client properties)."""
        if self.protocol == "PLAINTEXT":
            return {}
        options = {"kafka.security.protocol": self.protocol}
        if self.sasl:
            assert self.sasl_mechanism and self.username and self.password  # validated
            module = LOGIN_MODULES[self.sasl_mechanism]
            options["kafka.sasl.mechanism"] = self.sasl_mechanism
            options["kafka.sasl.jaas.config"] = (
                f"{module} required username={jaas_quoted(self.username)} "
                f"password={jaas_quoted(self.password)};"
            )
        if self.ca_file:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = self.ca_file
        return options

    def client_options(self) -> dict[str, object]:
        """Keyword arguments of kafka-python's clients (producer, consumer, admin)."""
        options: dict[str, object] = {"security_protocol": self.protocol}
        if self.sasl:
            options.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.username,
                sasl_plain_password=self.password,
            )
        if self.ca_file:
            options["ssl_cafile"] = self.ca_file
        return options
