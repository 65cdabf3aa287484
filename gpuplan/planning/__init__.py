"""gpuplan.planning"""
