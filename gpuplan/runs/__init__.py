"""A run's records: state transitions, its history of events, its machines' rows and what they cost."""
