"""The one launch sequence: choose an offer, estimate, gate, record, place with failover, start with a fail-safe."""
