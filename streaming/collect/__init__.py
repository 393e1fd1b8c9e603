"""`replmon collect`: Kafka's own request logs turned into replmon's event contract.

requestlog (one line -> a request record), sessions (KIP-227 fetch sessions -> per-partition
observations), infer (observations -> fetch/append events, what is exact and what is a bound),
tail (follow a rotated file), reorder (release events in event-time order), admin (metadata
and broker events, topic ids), publish (the metrics topic), collector (the loop).
"""
