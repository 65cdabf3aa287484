"""Names vulture reports that a framework uses, not a call gpuplan makes (`make lint` runs vulture with this file).

Each line names one, with why it must stay.
"""

frame  # noqa: F821, B018  the second argument of every signal handler (signal.signal calls it with two)
show  # noqa: F821, B018  `calibrate --show`: the flag of the default view, accepted so scripts may say it
