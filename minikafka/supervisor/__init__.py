"""Clusters of processes: a KRaft controller and brokers, each its own ``minikafka serve``
(:mod:`~minikafka.supervisor.processes`), and the ``serve --brokers N --processes`` command
(:mod:`~minikafka.supervisor.cli`)."""
