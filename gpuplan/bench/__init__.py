"""`gpuplan bench`: measured training throughput from real PyTorch steps.

torch is an optional extra (`pip install 'gpuplan[bench]'`). Only the modules that build and run the model
(`model`, `flops`, `runner`, `device`) import it, and only when a bench actually runs; `records` (store and
lookups, used by `estimate`) and `spec` (what to bench) never import torch, so the CLI stays fast.
"""
