"""The hardware gpuplan knows: the GPU table and each GPU's peak throughput per precision."""
