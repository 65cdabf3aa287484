"""What runs on a machine: the job spec, the boot script, the container runner and the metrics helper.

Installed as gpuplan.jobs. Nothing here imports a provider.
"""
