"""minikafka: a pure-Python mini Kafka broker and client emulator on Trio."""

__version__ = "0.1.0"
