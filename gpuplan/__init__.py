"""gpuplan: estimate, price, launch and account for PyTorch training jobs on rented cloud GPUs.

This module stays import-light on purpose: `gpuplan --help` must answer in well under 150 ms, so nothing
here (or in gpuplan.cli) may import SQLAlchemy, pandas, boto3, google.cloud or torch.
"""

__version__ = "0.1.0"
