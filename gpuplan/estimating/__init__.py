"""The pieces of `gpuplan.estimating.estimate`, one job per module: FLOPs, memory, the layout defaults, the step
model, the run overhead, communication.

Everything here is pure arithmetic on numbers and frozen dataclasses (no I/O), so the estimate is fast and the
planner can call it thousands of times.
"""
