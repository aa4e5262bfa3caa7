"""Clients that speak the Kafka protocol: a raw connection (more with the client-emulator issue)."""
