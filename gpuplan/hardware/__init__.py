"""gpuplan.hardware"""
