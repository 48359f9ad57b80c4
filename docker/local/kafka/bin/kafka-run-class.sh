#!/bin/bash
# kafka-run-class.sh CLASS ARGS...: a class of the broker's jars on Java, logging to stderr
exec "${JAVA_HOME}/bin/java" ${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m} -Djava.awt.headless=true \
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties \
  -cp '/opt/kafka/libs/*' "$@"
