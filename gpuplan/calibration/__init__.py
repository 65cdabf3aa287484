"""gpuplan.calibration.run_mfu"""
