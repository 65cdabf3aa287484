"""Fake Google APIs on loopback ports (Compute, Cloud Storage and its metadata server, Secret Manager, the billing
catalog), served to the real google-cloud clients."""
