"""gpuplan.scheduling"""
