"""gpuplan.launching"""
