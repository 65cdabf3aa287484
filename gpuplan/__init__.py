"""gpuplan: estimate, price, launch and account for PyTorch training jobs on rented cloud GPUs.

This module stays import-light on purpose: `gpuplan --help` must answer in well under 150 ms, so nothing
here (or in gpuplan.cli) may import SQLAlchemy, pandas, boto3, google.cloud or torch.
"""

import os as _os
import signal as _signal
import sys as _sys

__version__ = "0.1.0"


def interrupted_at_start(signum: int, frame: object) -> None:
    """SIGINT while the `gpuplan` process is still importing its modules: one line and exit 130 at once (nothing
    has been started or opened yet). gpuplan.cli.interrupt installs it for `python -m gpuplan` and replaces it in
    main() with the handler a running command needs."""
    _os.write(2, b"error: interrupted\n")
    _os._exit(130)


# The `gpuplan` console script imports this package first: take Ctrl-C from the first line of gpuplan code on,
# not only once click and the CLI have loaded (a KeyboardInterrupt traceback from inside an import otherwise).
if (_os.path.basename(_sys.argv[0] if _sys.argv else "") == "gpuplan"
        and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler):
    _signal.signal(_signal.SIGINT, interrupted_at_start)
