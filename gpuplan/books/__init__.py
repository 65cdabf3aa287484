"""gpuplan.books"""
