"""gpuplan.supervise"""
