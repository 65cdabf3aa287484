"""gpuplan.providers.slurm.provider"""
