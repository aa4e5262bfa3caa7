"""Broker configuration: Kafka ``server.properties`` keys that apply to minikafka.

Models ``kafka.server.KafkaConfig`` for the subset minikafka implements.  Keys
are Kafka's (dotted); :meth:`BrokerConfig.from_properties` reads a
``server.properties`` file and warns about keys it ignores.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .quota.entity import parse_quota_spec
from .security.listeners import (DEFAULT_PROTOCOL_MAP, EndPoint, ListenerError, advertised_host, check_advertised,
                                 inter_broker_listener, parse_listeners, parse_protocol_map)

log = logging.getLogger(__name__)

_HOUR_MS = 3600 * 1000


class StartupError(Exception):
    """The broker cannot start as configured; the command line prints the message as one line."""


def check_data_dir(path: Path) -> None:
    """Create the data dir if needed and make sure files can be written in it (StartupError otherwise)."""
    if path.exists() and not path.is_dir():
        raise StartupError(f"data dir {path} is not usable: it is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".minikafka-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StartupError(f"data dir {path} is not usable: {exc.strerror or exc}") from exc


class ConfigError(StartupError, ValueError):
    """A ``server.properties`` value that is not valid (Kafka's ``ConfigException``)."""

    def __init__(self, key: str, value: str, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {key}: {reason}")
        self.key = key


# Lower bounds Kafka's ConfigDef validates (``atLeast``) for the keys where nonsense would break the broker.
_AT_LEAST = {
    "num_partitions": 1, "default_replication_factor": 1, "broker_heartbeat_interval_ms": 1,
    "broker_session_timeout_ms": 1, "metadata_log_max_record_bytes_between_snapshots": 1,
    "metadata_log_max_snapshot_interval_ms": 0, "metadata_log_segment_bytes": 14, "metadata_max_retention_bytes": -1,
    "metadata_max_retention_ms": -1, "leader_imbalance_check_interval_seconds": 0.001, "message_max_bytes": 0,
    "socket_request_max_bytes": 1,
    "log_segment_bytes": 14, "log_cleaner_threads": 0, "log_cleaner_backoff_ms": 0,
    "log_cleaner_dedupe_buffer_size": 24, "log_cleaner_delete_retention_ms": 0, "log_cleaner_min_compaction_lag_ms": 0,
    "log_cleaner_max_compaction_lag_ms": 1, "log_message_timestamp_before_max_ms": 0,
    "log_message_timestamp_after_max_ms": 0, "log_message_timestamp_difference_max_ms": 0,
    "log_index_interval_bytes": 0, "max_connections": 0, "max_connections_per_ip": 0,
    "connections_max_idle_ms": 1, "max_partitions": 1, "quota_window_num": 1, "quota_window_size_seconds": 1,
    "replication_quota_window_num": 1, "replication_quota_window_size_seconds": 1, "min_insync_replicas": 1,
    "max_incremental_fetch_session_cache_slots": 0, "fetch_max_bytes": 0, "port": 0,
    "transaction_max_timeout_ms": 1, "transaction_abort_timed_out_transaction_cleanup_interval_ms": 1,
    "transaction_remove_expired_transaction_cleanup_interval_ms": 1, "transactional_id_expiration_ms": 1,
    "connections_max_reauth_ms": 0, "sasl_server_max_receive_size": 1, "max_request_partition_size_limit": 1,
    "delegation_token_max_lifetime_ms": 1, "delegation_token_expiry_time_ms": 1,
    "delegation_token_expiry_check_interval_ms": 1,
    "offsets_topic_num_partitions": 1, "offsets_topic_segment_bytes": 1, "offsets_topic_replication_factor": 1,
    "offsets_commit_timeout_ms": 1,
    "transaction_state_log_segment_bytes": 1, "share_coordinator_state_topic_segment_bytes": 1,
    "transaction_state_log_num_partitions": 1, "transaction_state_log_replication_factor": 1,
    "transaction_state_log_min_isr": 1, "request_timeout_ms": 1,
    "share_coordinator_state_topic_num_partitions": 1, "share_coordinator_state_topic_replication_factor": 1,
    "share_coordinator_state_topic_min_isr": 1, "share_coordinator_write_timeout_ms": 1,
    "group_consumer_session_timeout_ms": 1, "group_consumer_heartbeat_interval_ms": 1,
    "group_share_session_timeout_ms": 1, "group_share_heartbeat_interval_ms": 1,
    "group_share_record_lock_duration_ms": 1, "group_share_delivery_count_limit": 2,
    "group_share_partition_max_record_locks": 1, "telemetry_max_bytes": 1,
    "replica_alter_log_dirs_io_max_bytes_per_second": 1,
}

# Security keys the listeners, TLS and SASL read from ``extra`` (raw, possibly per listener as
# ``listener.name.<listener>.<key>``): not reported as unused.
SECURITY_KEY_PREFIXES = ("ssl.", "sasl.", "listener.name.", "principal.builder.class", "minikafka.scram.")


def is_jaas_config_key(key: str) -> bool:
    """Whether ``key`` is a JAAS setting: ``sasl.jaas.config``, or one prefixed for a listener and mechanism."""
    return key == "sasl.jaas.config" or key.endswith(".sasl.jaas.config")


@dataclass
class BrokerConfig:
    """The settings of one broker, with Kafka's defaults."""

    # The first listener's host and port (without ``listeners``, the one PLAINTEXT listener's).
    host: str = "127.0.0.1"
    port: int = 9092
    node_id: int = 0
    # The first log directory: partition logs in <data_dir>/logs, the broker's and coordinators' state
    # beside them (Kafka's metadata.log.dir defaults to the first of log.dirs likewise).  None: memory.
    data_dir: Path | None = None
    # Kafka's log.dirs when it names several directories (the first is ``data_dir``); see
    # :attr:`all_log_dirs`.  Empty: ``data_dir`` alone.
    log_dirs: list[Path] = field(default_factory=list)
    advertised_host: str | None = None
    cluster_id: str = "minikafka-cluster-0000"
    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 104857600
    # Bytes of request frames buffered across all connections (Kafka's queued.max.request.bytes, whose
    # default -1 is unbounded); minikafka bounds it at 256 MiB so a laptop broker cannot be made to
    # hold more than that in partly received requests.  -1: unbounded, as Kafka.
    queued_max_request_bytes: int = 256 << 20
    # minikafka's own: partition replicas the process may host (Kafka has no such ceiling; ~3 KB each here).
    max_partitions: int = 50_000
    max_connections: int = 2147483647
    max_connections_per_ip: int = 2147483647
    connections_max_idle_ms: int = 600000
    log_segment_bytes: int = 1 << 30
    log_retention_ms: int = 168 * _HOUR_MS
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300000
    log_roll_ms: int = 168 * _HOUR_MS
    log_index_interval_bytes: int = 4096
    log_message_timestamp_type: str = "CreateTime"
    # Per-record timestamp bounds (Kafka's log.message.timestamp.{before,after}.max.ms, KIP-937).
    log_message_timestamp_before_max_ms: int = 9223372036854775807
    log_message_timestamp_after_max_ms: int = 9223372036854775807
    log_message_timestamp_difference_max_ms: int = 9223372036854775807  # deprecated (Kafka 3.6), for unset bounds
    # The log cleaner (Kafka's log.cleaner.* keys and the compaction defaults of every topic).
    log_cleanup_policy: str = "delete"
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_dedupe_buffer_size: int = 134217728
    log_cleaner_io_buffer_load_factor: float = 0.9
    log_cleaner_io_max_bytes_per_second: float = 1.7976931348623157e308  # Kafka's Double.MaxValue: no limit
    # minikafka's own: clean logs in a data dir in cleaning processes (another core, as Kafka's cleaner
    # threads use one) rather than on a thread sharing the broker's GIL.
    log_cleaner_processes: bool = True
    log_cleaner_delete_retention_ms: int = 86400000
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = 9223372036854775807
    offsets_retention_minutes: int = 10080
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2147483647
    # KIP-848 consumer groups (Kafka's group.consumer.* keys).
    group_coordinator_rebalance_protocols: str = "classic,consumer,share"
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_assignors: str = "uniform,range"
    group_consumer_max_size: int = 2147483647
    group_consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups (Kafka's group.share.* keys).
    group_share_session_timeout_ms: int = 45000
    group_share_min_session_timeout_ms: int = 45000
    group_share_max_session_timeout_ms: int = 60000
    group_share_heartbeat_interval_ms: int = 5000
    group_share_min_heartbeat_interval_ms: int = 5000
    group_share_max_heartbeat_interval_ms: int = 15000
    group_share_record_lock_duration_ms: int = 30000
    group_share_min_record_lock_duration_ms: int = 15000
    group_share_max_record_lock_duration_ms: int = 60000
    group_share_delivery_count_limit: int = 5
    group_share_min_delivery_count_limit: int = 2
    group_share_max_delivery_count_limit: int = 10
    group_share_partition_max_record_locks: int = 2000
    group_share_max_size: int = 200
    group_share_max_share_sessions: int = 2000
    # The __consumer_offsets topic: its partition count places each group's coordinator; created on the first
    # FindCoordinator with this replication factor (capped at the registered, unfenced brokers).
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    # How long an OffsetCommit waits for its records to be replicated (REQUEST_TIMED_OUT after).
    offsets_commit_timeout_ms: int = 5000
    # The __transaction_state topic: its partition count places each transactional id's coordinator; created on
    # the first FindCoordinator for a transactional id, its replication factor and min.insync.replicas capped
    # at the registered, unfenced brokers.
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    # How long the transaction coordinator waits for its records to be replicated (Kafka's request.timeout.ms;
    # COORDINATOR_NOT_AVAILABLE after).
    request_timeout_ms: int = 30000
    # The __share_group_state topic: its partition count places each share-partition's share coordinator;
    # created at the first use of a share-partition, its replication factor and min.insync.replicas capped at
    # the registered, unfenced brokers.
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    # How long an acknowledgement waits for the share-partition state it wrote to be replicated
    # (COORDINATOR_NOT_AVAILABLE after).
    share_coordinator_write_timeout_ms: int = 5000
    # minikafka's own: the feature levels a new cluster is formatted with (kafka-storage.sh format
    # --release-version/--feature), "name=level,..." (e.g. "metadata.version=4.0-IV3,transaction.version=1");
    # empty: Kafka 4.2's defaults.  See minikafka.broker.features.
    bootstrap_features: str = ""
    # Segment sizes of the coordinators' compacted internal topics (Kafka's defaults).
    offsets_topic_segment_bytes: int = 104857600
    transaction_state_log_segment_bytes: int = 104857600
    share_coordinator_state_topic_segment_bytes: int = 104857600
    min_insync_replicas: int = 1
    transactional_id_expiration_ms: int = 604800000
    transaction_max_timeout_ms: int = 900000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    producer_id_expiration_ms: int = 86400000
    fetch_max_bytes: int = 57671680
    max_incremental_fetch_session_cache_slots: int = 1000
    min_incremental_fetch_session_eviction_ms: int = 120000
    # The most partitions one DescribeTopicPartitions response describes (Kafka's
    # max.request.partition.size.limit; the request's own limit may only lower it).
    max_request_partition_size_limit: int = 2000
    # KIP-714 client metrics: the largest PushTelemetry payload accepted (Kafka's telemetry.max.bytes).
    telemetry_max_bytes: int = 1048576
    # Replication (Kafka's replica.* keys).
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_backoff_ms: int = 1000
    replica_lag_time_max_ms: int = 30000
    # KRaft broker liveness: a broker heartbeats every interval; the controller fences one silent for the timeout.
    broker_heartbeat_interval_ms: int = 2000
    broker_session_timeout_ms: int = 9000
    # The controller's metadata log: a snapshot after this many bytes (or this long with something appended),
    # its segments, and how much of the log below the latest snapshot is kept (KIP-630).
    metadata_log_max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    metadata_log_max_snapshot_interval_ms: int = 3600 * 1000
    metadata_log_segment_bytes: int = 1024 * 1024 * 1024
    metadata_max_retention_bytes: int = 100 * 1024 * 1024
    metadata_max_retention_ms: int = 7 * 24 * 3600 * 1000
    # The controller's leader elections: unclean ones (a replica out of the ISR) only when enabled (topic config
    # of the same name overrides); preferred leaders given back every check interval (KRaft's leader balancing).
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: float = 300.0
    replica_socket_timeout_ms: int = 30000
    # Fetch version the replica fetcher sends: Kafka picks it from
    # inter.broker.protocol.version; 8 is what a 2.0 broker sends (6 = no sessions).
    replica_fetch_request_version: int = 8
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    # Replication quotas (Kafka's ReplicationQuotaManager), bytes/s; -1 = unlimited
    # (Kafka's default is Long.MAX_VALUE).  Dynamic broker configs, settable at run time.
    leader_replication_throttled_rate: int = -1
    follower_replication_throttled_rate: int = -1
    # Bytes/s a replica moving between log dirs is copied at (Kafka's replica.alter.log.dirs.io.max.bytes.per.
    # second, Long.MAX_VALUE: unlimited); static here, where Kafka also changes it at run time.
    replica_alter_log_dirs_io_max_bytes_per_second: int = 9223372036854775807
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    # Client quotas set at start-up: "ENTITY:key=value[,key=value]" with ENTITY like
    # "client-id=app1", "user=alice,client-id=<default>" (see minikafka.broker.quota).
    client_quotas: list[str] = field(default_factory=list)
    # Listeners (Kafka's keys, kept as written; :meth:`listener_endpoints` parses and checks them).  Empty
    # ``listeners``: one PLAINTEXT listener on host:port.  A listener's port 0 picks a free port.
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = ",".join(f"{k}:{v}" for k, v in DEFAULT_PROTOCOL_MAP.items())
    inter_broker_listener_name: str | None = None
    security_inter_broker_protocol: str | None = None
    # KRaft roles (Kafka's process.roles): "" runs the controller and the brokers of this process together, as
    # before; "broker" a broker whose controller is the process at controller.quorum.bootstrap.servers;
    # "controller" a controller alone (minikafka.broker.controller_server).
    process_roles: str = ""
    # minikafka's own: the address this broker's connections to other brokers and to its controller come from
    # (a cluster of processes gives each broker its own loopback address, so that the links between them can be
    # cut); "" lets the system choose.
    source_address: str = ""
    controller_quorum_bootstrap_servers: str = ""
    controller_listener_names: str = ""
    # KIP-368: a SASL session's longest life before the client must re-authenticate (0: no limit);
    # also per listener and mechanism: listener.name.<l>.<mechanism>.connections.max.reauth.ms.
    connections_max_reauth_ms: int = 0
    # Largest frame accepted before a connection has authenticated (Kafka's sasl.server.max.receive.size).
    sasl_server_max_receive_size: int = 524288
    # Delegation tokens (KIP-48; Kafka's DelegationTokenManagerConfigs): the secret the tokens' HMACs are
    # made with (the same on every broker; empty: delegation tokens are disabled), a token's longest life,
    # its life until renewed, and how often expired tokens are removed.
    delegation_token_secret_key: str = field(default="", repr=False)
    delegation_token_max_lifetime_ms: int = 7 * 24 * _HOUR_MS
    delegation_token_expiry_time_ms: int = 24 * _HOUR_MS
    delegation_token_expiry_check_interval_ms: int = _HOUR_MS
    # Authorization (Kafka's authorizer.class.name: StandardAuthorizer or AclAuthorizer; empty = none),
    # super.users (principals separated by ";") and allow.everyone.if.no.acl.found.
    authorizer_class_name: str = ""
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False
    # Traffic capture (minikafka's own): a directory for capture-<broker>-<seq>.mkcap files, None = off.
    capture_dir: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def all_log_dirs(self) -> list[Path]:
        """Every log directory (Kafka's ``log.dirs``), ``data_dir`` first; none in memory.  ``log_dirs``
        counts only while its first entry is ``data_dir``: setting ``data_dir`` alone (``--data-dir``, a
        cluster's per-broker dir) means that one directory."""
        if self.data_dir is None:
            return []
        if not self.log_dirs or Path(self.log_dirs[0]) != Path(self.data_dir):
            return [Path(self.data_dir)]
        return list(dict.fromkeys(Path(d) for d in self.log_dirs))

    @property
    def advertised(self) -> str:
        """The host name clients are told to connect to (on the first listener)."""
        if self.advertised_listeners:
            try:
                first = self.listener_endpoints()[0].listener
                for e in self.advertised_endpoints():
                    if e.listener == first:
                        return e.host
            except ConfigError:
                pass
        if self.advertised_host:
            return self.advertised_host
        return advertised_host(self.host)

    # -- listeners (Kafka's KafkaConfig.listeners / effectiveAdvertisedListeners) ----------------------
    def protocol_map(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as listener name -> security protocol."""
        try:
            return parse_protocol_map(self.listener_security_protocol_map)
        except ListenerError as exc:
            raise ConfigError("listener.security.protocol.map", self.listener_security_protocol_map, str(exc)) from None

    def listener_endpoints(self) -> list[EndPoint]:
        """The listeners to bind; the first one's host and port are ``host``/``port``."""
        pm = self.protocol_map()
        if not self.listeners:
            if "PLAINTEXT" not in pm:
                raise ConfigError("listeners", "", "No security protocol defined for listener PLAINTEXT")
            return [EndPoint("PLAINTEXT", self.host, self.port, pm["PLAINTEXT"])]
        try:
            endpoints = parse_listeners(self.listeners, pm)
        except ListenerError as exc:
            raise ConfigError("listeners", self.listeners, str(exc)) from None
        if not endpoints:
            raise ConfigError("listeners", self.listeners, "no listener given")
        endpoints[0] = EndPoint(endpoints[0].listener, self.host, self.port, endpoints[0].security_protocol)
        return endpoints

    def advertised_endpoints(self, bound: dict[str, int] | None = None) -> list[EndPoint]:
        """What clients are told, per listener: ``advertised.listeners`` or else the listeners themselves.
        ``bound``: the port each listener got (replaces a port of 0)."""
        listeners = self.listener_endpoints()
        ports = {e.listener: (bound or {}).get(e.listener, e.port) for e in listeners}
        if self.advertised_listeners:
            try:
                advertised = parse_listeners(self.advertised_listeners, self.protocol_map())
                check_advertised(advertised, listeners)
            except ListenerError as exc:
                raise ConfigError("advertised.listeners", self.advertised_listeners, str(exc)) from None
            return [e if e.port else e.with_port(ports[e.listener]) for e in advertised]
        host = self.advertised_host
        return [EndPoint(e.listener, host or advertised_host(e.host), ports[e.listener], e.security_protocol)
                for e in listeners]

    def inter_broker_endpoint(self, bound: dict[str, int] | None = None) -> EndPoint:
        """The advertised listener brokers use to reach each other."""
        try:
            return inter_broker_listener(self.advertised_endpoints(bound), self.inter_broker_listener_name,
                                         self.security_inter_broker_protocol)
        except ListenerError as exc:
            key = "inter.broker.listener.name" if self.inter_broker_listener_name else "security.inter.broker.protocol"
            value = self.inter_broker_listener_name or self.security_inter_broker_protocol or "PLAINTEXT"
            raise ConfigError(key, value, str(exc)) from None

    def check_listeners(self) -> None:
        """Raise :class:`ConfigError` for listener settings Kafka refuses at start-up."""
        self.inter_broker_endpoint()

    def security_value(self, key: str, listener: str | None = None, mechanism: str | None = None) -> str | None:
        """A security setting as Kafka resolves it for a listener: ``listener.name.<l>.<mechanism>.<key>``,
        then ``listener.name.<l>.<key>``, then ``<key>`` (None when unset)."""
        if listener is not None:
            prefix = f"listener.name.{listener.lower()}."
            if mechanism is not None:
                value = self.extra.get(f"{prefix}{mechanism.lower()}.{key}")
                if value is not None:
                    return value
            value = self.extra.get(prefix + key)
            if value is not None:
                return value
        return self.extra.get(key)

    def jaas_configs(self) -> dict[str, str]:
        """Every JAAS setting (:func:`is_jaas_config_key`) given to this broker."""
        return {key: value for key, value in self.extra.items() if is_jaas_config_key(key)}

    def connections_max_reauth_ms_for(self, listener: str, mechanism: str) -> int:
        """``connections.max.reauth.ms`` for one listener and SASL mechanism (0: sessions never expire)."""
        prefix = f"listener.name.{listener.lower()}."
        for key in (f"{prefix}{mechanism.lower()}.connections.max.reauth.ms", f"{prefix}connections.max.reauth.ms"):
            value = self.extra.get(key)
            if value is not None:
                return _parse_int(key, value, "connections_max_reauth_ms")
        return self.connections_max_reauth_ms

    # Kafka key -> attribute, for the keys that map one to one.
    KEYS = {
        "broker.id": "node_id",
        "node.id": "node_id",
        "num.partitions": "num_partitions",
        "auto.create.topics.enable": "auto_create_topics_enable",
        "default.replication.factor": "default_replication_factor",
        "delete.topic.enable": "delete_topic_enable",
        "message.max.bytes": "message_max_bytes",
        "socket.request.max.bytes": "socket_request_max_bytes",
        "telemetry.max.bytes": "telemetry_max_bytes",
        "queued.max.request.bytes": "queued_max_request_bytes",
        "minikafka.max.partitions": "max_partitions",
        "max.connections": "max_connections",
        "max.connections.per.ip": "max_connections_per_ip",
        "connections.max.idle.ms": "connections_max_idle_ms",
        "log.segment.bytes": "log_segment_bytes",
        "log.retention.ms": "log_retention_ms",
        "log.retention.bytes": "log_retention_bytes",
        "log.retention.check.interval.ms": "log_retention_check_interval_ms",
        "log.roll.ms": "log_roll_ms",
        "log.index.interval.bytes": "log_index_interval_bytes",
        "log.message.timestamp.type": "log_message_timestamp_type",
        "log.message.timestamp.before.max.ms": "log_message_timestamp_before_max_ms",
        "log.message.timestamp.after.max.ms": "log_message_timestamp_after_max_ms",
        "log.message.timestamp.difference.max.ms": "log_message_timestamp_difference_max_ms",
        "log.cleanup.policy": "log_cleanup_policy",
        "log.cleaner.enable": "log_cleaner_enable",
        "log.cleaner.threads": "log_cleaner_threads",
        "log.cleaner.backoff.ms": "log_cleaner_backoff_ms",
        "log.cleaner.dedupe.buffer.size": "log_cleaner_dedupe_buffer_size",
        "log.cleaner.io.buffer.load.factor": "log_cleaner_io_buffer_load_factor",
        "log.cleaner.io.max.bytes.per.second": "log_cleaner_io_max_bytes_per_second",
        "minikafka.log.cleaner.processes": "log_cleaner_processes",
        "log.cleaner.delete.retention.ms": "log_cleaner_delete_retention_ms",
        "log.cleaner.min.cleanable.ratio": "log_cleaner_min_cleanable_ratio",
        "log.cleaner.min.compaction.lag.ms": "log_cleaner_min_compaction_lag_ms",
        "log.cleaner.max.compaction.lag.ms": "log_cleaner_max_compaction_lag_ms",
        "log.dirs": "data_dir",
        "log.dir": "data_dir",
        "offsets.retention.minutes": "offsets_retention_minutes",
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.max.size": "group_max_size",
        "group.coordinator.rebalance.protocols": "group_coordinator_rebalance_protocols",
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "offsets.topic.replication.factor": "offsets_topic_replication_factor",
        "offsets.commit.timeout.ms": "offsets_commit_timeout_ms",
        "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
        "transaction.state.log.segment.bytes": "transaction_state_log_segment_bytes",
        "transaction.state.log.num.partitions": "transaction_state_log_num_partitions",
        "transaction.state.log.replication.factor": "transaction_state_log_replication_factor",
        "transaction.state.log.min.isr": "transaction_state_log_min_isr",
        "request.timeout.ms": "request_timeout_ms",
        "share.coordinator.state.topic.segment.bytes": "share_coordinator_state_topic_segment_bytes",
        "share.coordinator.state.topic.num.partitions": "share_coordinator_state_topic_num_partitions",
        "share.coordinator.state.topic.replication.factor": "share_coordinator_state_topic_replication_factor",
        "share.coordinator.state.topic.min.isr": "share_coordinator_state_topic_min_isr",
        "share.coordinator.write.timeout.ms": "share_coordinator_write_timeout_ms",
        "minikafka.bootstrap.features": "bootstrap_features",
        "group.consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
        "group.consumer.min.session.timeout.ms": "group_consumer_min_session_timeout_ms",
        "group.consumer.max.session.timeout.ms": "group_consumer_max_session_timeout_ms",
        "group.consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
        "group.consumer.min.heartbeat.interval.ms": "group_consumer_min_heartbeat_interval_ms",
        "group.consumer.max.heartbeat.interval.ms": "group_consumer_max_heartbeat_interval_ms",
        "group.consumer.assignors": "group_consumer_assignors",
        "group.consumer.max.size": "group_consumer_max_size",
        "group.consumer.migration.policy": "group_consumer_migration_policy",
        "group.share.session.timeout.ms": "group_share_session_timeout_ms",
        "group.share.min.session.timeout.ms": "group_share_min_session_timeout_ms",
        "group.share.max.session.timeout.ms": "group_share_max_session_timeout_ms",
        "group.share.heartbeat.interval.ms": "group_share_heartbeat_interval_ms",
        "group.share.min.heartbeat.interval.ms": "group_share_min_heartbeat_interval_ms",
        "group.share.max.heartbeat.interval.ms": "group_share_max_heartbeat_interval_ms",
        "group.share.record.lock.duration.ms": "group_share_record_lock_duration_ms",
        "group.share.min.record.lock.duration.ms": "group_share_min_record_lock_duration_ms",
        "group.share.max.record.lock.duration.ms": "group_share_max_record_lock_duration_ms",
        "group.share.delivery.count.limit": "group_share_delivery_count_limit",
        "group.share.min.delivery.count.limit": "group_share_min_delivery_count_limit",
        "group.share.max.delivery.count.limit": "group_share_max_delivery_count_limit",
        "group.share.partition.max.record.locks": "group_share_partition_max_record_locks",
        "group.share.max.size": "group_share_max_size",
        "group.share.max.share.sessions": "group_share_max_share_sessions",
        "min.insync.replicas": "min_insync_replicas",
        "transaction.max.timeout.ms": "transaction_max_timeout_ms",
        "transactional.id.expiration.ms": "transactional_id_expiration_ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms":
            "transaction_abort_timed_out_transaction_cleanup_interval_ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms":
            "transaction_remove_expired_transaction_cleanup_interval_ms",
        "fetch.max.bytes": "fetch_max_bytes",
        "max.incremental.fetch.session.cache.slots": "max_incremental_fetch_session_cache_slots",
        "min.incremental.fetch.session.eviction.ms": "min_incremental_fetch_session_eviction_ms",
        "max.request.partition.size.limit": "max_request_partition_size_limit",
        "cluster.id": "cluster_id",
        "quota.window.num": "quota_window_num",
        "replica.fetch.max.bytes": "replica_fetch_max_bytes",
        "replica.fetch.wait.max.ms": "replica_fetch_wait_max_ms",
        "replica.fetch.min.bytes": "replica_fetch_min_bytes",
        "replica.fetch.response.max.bytes": "replica_fetch_response_max_bytes",
        "replica.fetch.backoff.ms": "replica_fetch_backoff_ms",
        "replica.lag.time.max.ms": "replica_lag_time_max_ms",
        "broker.heartbeat.interval.ms": "broker_heartbeat_interval_ms",
        "broker.session.timeout.ms": "broker_session_timeout_ms",
        "metadata.log.max.record.bytes.between.snapshots": "metadata_log_max_record_bytes_between_snapshots",
        "metadata.log.max.snapshot.interval.ms": "metadata_log_max_snapshot_interval_ms",
        "metadata.log.segment.bytes": "metadata_log_segment_bytes",
        "metadata.max.retention.bytes": "metadata_max_retention_bytes",
        "metadata.max.retention.ms": "metadata_max_retention_ms",
        "unclean.leader.election.enable": "unclean_leader_election_enable",
        "auto.leader.rebalance.enable": "auto_leader_rebalance_enable",
        "leader.imbalance.check.interval.seconds": "leader_imbalance_check_interval_seconds",
        "replica.socket.timeout.ms": "replica_socket_timeout_ms",
        "replica.fetch.request.version": "replica_fetch_request_version",
        "quota.window.size.seconds": "quota_window_size_seconds",
        "leader.replication.throttled.rate": "leader_replication_throttled_rate",
        "follower.replication.throttled.rate": "follower_replication_throttled_rate",
        "replica.alter.log.dirs.io.max.bytes.per.second": "replica_alter_log_dirs_io_max_bytes_per_second",
        "replication.quota.window.num": "replication_quota_window_num",
        "replication.quota.window.size.seconds": "replication_quota_window_size_seconds",
        "authorizer.class.name": "authorizer_class_name",
        "super.users": "super_users",
        "allow.everyone.if.no.acl.found": "allow_everyone_if_no_acl_found",
        "inter.broker.listener.name": "inter_broker_listener_name",
        "process.roles": "process_roles",
        "minikafka.source.address": "source_address",
        "controller.quorum.bootstrap.servers": "controller_quorum_bootstrap_servers",
        "controller.listener.names": "controller_listener_names",
        "security.inter.broker.protocol": "security_inter_broker_protocol",
        "connections.max.reauth.ms": "connections_max_reauth_ms",
        "sasl.server.max.receive.size": "sasl_server_max_receive_size",
        "delegation.token.secret.key": "delegation_token_secret_key",
        "delegation.token.max.lifetime.ms": "delegation_token_max_lifetime_ms",
        "delegation.token.expiry.time.ms": "delegation_token_expiry_time_ms",
        "delegation.token.expiry.check.interval.ms": "delegation_token_expiry_check_interval_ms",
    }
    # Units Kafka also accepts for retention: hours and minutes.
    _RETENTION_UNITS = {"log.retention.hours": _HOUR_MS, "log.retention.minutes": 60000}

    def set(self, key: str, value: str) -> None:
        """Apply one ``server.properties`` entry; :class:`ConfigError` for a value of the wrong type."""
        if key in self._RETENTION_UNITS:
            self.log_retention_ms = _parse_int(key, value) * self._RETENTION_UNITS[key]
            return
        if key in ("listeners", "advertised.listeners"):
            ports = []
            for item in filter(None, (v.strip() for v in value.split(","))):
                ports.append(_parse_int(key, item.rpartition(":")[2], "port"))
            if key == "advertised.listeners":
                self.advertised_listeners = value
                return
            self.listeners = value
            if ports:  # host and port are the first listener's
                hostport = value.strip().split(",")[0].split("://")[-1]
                self.host = hostport.rpartition(":")[0].strip("[]")
                self.port = ports[0]
            return
        if key == "listener.security.protocol.map":
            try:
                parse_protocol_map(value)
            except ListenerError as exc:
                raise ConfigError(key, value, str(exc)) from None
            self.listener_security_protocol_map = value
            return
        if key == "client.quotas":
            specs = [q.strip() for q in value.split(";") if q.strip()]
        elif key in ("quota.producer.default", "quota.consumer.default"):
            # Kafka's pre-3.0 static defaults: a /clients/<default> quota.
            kind = "producer_byte_rate" if "producer" in key else "consumer_byte_rate"
            specs = [f"client-id=<default>:{kind}={value}"]
        else:
            specs = None
        if specs is not None:
            for spec in specs:
                try:
                    parse_quota_spec(spec)
                except ValueError as exc:
                    raise ConfigError(key, value, str(exc)) from None
            self.client_quotas.extend(specs)
            return
        if key in ("log.dirs", "log.dir"):
            dirs = [Path(d.strip()) for d in value.split(",") if d.strip()]
            if not dirs:
                raise ConfigError(key, value, "Empty list")
            self.data_dir, self.log_dirs = dirs[0], dirs
            return
        attr = self.KEYS.get(key)
        if attr is None:
            self.extra[key] = value
            if not key.startswith(SECURITY_KEY_PREFIXES):
                log.info("config key %s is not used by minikafka; kept as given", key)
            return
        current = getattr(self, attr)
        setattr(self, attr, _coerce(key, value, current, attr))

    @classmethod
    def from_properties(cls, path: str | Path, **overrides: Any) -> "BrokerConfig":
        """Read a Kafka ``server.properties`` file, then apply ``overrides``."""
        cfg = cls()
        for key, value in read_properties(path).items():
            cfg.set(key, value)
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, v)
        return cfg

    def topic_defaults(self) -> dict[str, str]:
        """Broker-level defaults for topic configs, under the topic config names."""
        return {
            "segment.bytes": str(self.log_segment_bytes),
            "retention.ms": str(self.log_retention_ms),
            "retention.bytes": str(self.log_retention_bytes),
            "segment.ms": str(self.log_roll_ms),
            "index.interval.bytes": str(self.log_index_interval_bytes),
            "message.timestamp.type": self.log_message_timestamp_type,
            "max.message.bytes": str(self.message_max_bytes),
            "min.insync.replicas": str(self.min_insync_replicas),
            "cleanup.policy": self.log_cleanup_policy,
            "compression.type": "producer",
            "delete.retention.ms": str(self.log_cleaner_delete_retention_ms),
            "min.cleanable.dirty.ratio": repr(self.log_cleaner_min_cleanable_ratio),
            "min.compaction.lag.ms": str(self.log_cleaner_min_compaction_lag_ms),
            "max.compaction.lag.ms": str(self.log_cleaner_max_compaction_lag_ms),
            "message.timestamp.before.max.ms": str(self.log_message_timestamp_before_max_ms),
            "message.timestamp.after.max.ms": str(self.log_message_timestamp_after_max_ms),
            "message.timestamp.difference.max.ms": str(self.log_message_timestamp_difference_max_ms),
        }


def _parse_int(key: str, value: str, attr: str = "") -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise ConfigError(key, value, "Not a number of type INT") from None
    low = _AT_LEAST.get(attr)
    if low is not None and n < low:
        raise ConfigError(key, value, f"Value must be at least {low}")
    if attr == "port" and n > 65535:
        raise ConfigError(key, value, "Value must be no more than 65535")
    return n


def _coerce(key: str, value: str, current: Any, attr: str) -> Any:
    if attr == "data_dir":
        return Path(value.split(",")[0])
    if attr in ("inter_broker_listener_name", "security_inter_broker_protocol"):
        return value.strip().upper() or None
    if attr == "process_roles":
        roles = sorted({r.strip().lower() for r in value.split(",") if r.strip()})
        if not set(roles) <= {"broker", "controller"}:
            raise ConfigError(key, value, "process.roles is broker, controller or broker,controller")
        return ",".join(roles)
    if isinstance(current, bool):
        v = value.strip().lower()
        if v not in ("true", "false"):
            raise ConfigError(key, value, "Expected value to be either true or false")
        return v == "true"
    if isinstance(current, int):
        return _parse_int(key, value, attr)
    if isinstance(current, float):
        try:
            return float(value.strip())
        except ValueError:
            raise ConfigError(key, value, "Not a number of type DOUBLE") from None
    return value


def _logical_lines(text: str) -> list[str]:
    """Java ``Properties`` logical lines: a line ending in an odd number of backslashes continues on the
    next one, whose leading white space is dropped (long values such as ``sasl.jaas.config``)."""
    out: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip() if pending is not None else raw.strip()
        if pending is None and (not line or line[0] in "#!"):
            continue
        continued = (len(raw) - len(raw.rstrip("\\"))) % 2 == 1  # as Java: a trailing space ends the line
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def read_properties(path: str | Path) -> dict[str, str]:
    """Parse a Java ``.properties`` file (``key=value`` or ``key: value``, # and ! comments, backslash
    line continuations)."""
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise StartupError(f"cannot read config file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    for line in _logical_lines(text):
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                out[k.strip()] = v.strip()
                break
    return out

