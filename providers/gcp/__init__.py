"""gpuplan.providers.gcp.provider"""
