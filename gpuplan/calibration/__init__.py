"""What measured runs and benches teach the estimator: learned MFU, the throughput an estimate uses, start-up."""
