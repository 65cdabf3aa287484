"""gpuplan.runs.records"""
