"""Google Compute Engine: the provider, the VM body, GCE's rules, run outputs in GCS, secrets in Secret Manager."""
