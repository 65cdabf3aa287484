"""Azure: so far only its public retail prices (prices.py); the provider itself is not written yet."""
