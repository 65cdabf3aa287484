"""Ranking GPU offers by the cost of the whole job, and the dollars of an estimate."""
