"""After the start: watch and cap runs, settle ended ones, relaunch after preemption, adopt, reconcile."""
