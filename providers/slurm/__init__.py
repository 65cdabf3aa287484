"""A Slurm cluster: the provider, its batch script, and the parsing of what Slurm's commands print."""
