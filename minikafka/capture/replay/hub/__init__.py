"""The replay hub: one coordinator the processes of a distributed replay (Spark tasks) talk to over TCP.

A replay spread over several processes must keep the capture's causality
across them: a Produce replayed by one task waits for the InitProducerId that
another task replays, then sends the producer id the target gave *there*.  Each
task runs the ordinary Trio replayer on its share of the connections and
publishes to the hub what other tasks may wait for:

* progress: "connection *i* has settled its first *n* requests" (monotonic: only
  the latest count per connection matters, so counts are coalesced);
* values the target made up (the replay's captured -> replayed map: producer
  ids, member ids, fetch session ids, topic ids ...);
* member epochs (KIP-848/932: per member, the latest captured and replayed epoch).

The hub forwards every publication to every other task, which applies it
locally (its waits on dependencies then complete), and keeps the whole state so
a task that connects late starts from a snapshot.  Order: what a task published
before a progress count reaches every other task no later than that count (a
batch carries values and epochs first, then the coalesced counts; coalescing only
ever delays a count).  A task that disconnects without saying goodbye is logged
and announced to the others (``on_lost``: the connections it replayed); the hub
carries on.

The hub also serves one clock: tasks estimate the offset of their clock to the
hub's (ping/pong exchanges, keeping the sample with the smallest round trip, as
NTP's clock filter does), so paced replays (1x, Nx) share one base time across
machines: the driver picks it in hub time and each task converts it.

Like Kafka's group coordinator it is one process everybody reaches over TCP; unlike
it, it only relays (no assignment, no persistence).  Wire format: messages of a
4-byte big-endian length and a JSON object; values are JSON with a tagged encoding
for tuples (``{"t": [...]}``), UUIDs (``{"u": hex}``), bytes (``{"b": base64}``) and
dicts (``{"d": [[k, v], ...]}``) -- not pickle: nothing a peer sends is executed.
No pyspark here: the Spark job (:mod:`minikafka.analysis.replay_job`) runs
:class:`~.threaded.ReplayHub` on the driver and :class:`~.sync.HubSync` (through
:func:`~.client.connect_hub`) in each task.

One module a job:

* :mod:`.codec` -- the wire: framing, the tagged value encoding, :class:`~.codec.HubMessageError`;
* :mod:`.outbox` -- what waits to go out on one connection (events in order, counts coalesced);
* :mod:`.server` -- :class:`~.server.HubServer`, the hub's state and connection handler on a Trio loop;
* :mod:`.threaded` -- :class:`~.threaded.ReplayHub`, the server in a background thread for synchronous code;
* :mod:`.client` -- :class:`~.client.HubClient` and :func:`~.client.connect_hub`, a task's connection;
* :mod:`.sync` -- :class:`~.sync.HubSync`, a replay's progress and value map published through a client.
"""
