"""Where machines come from. Installed as gpuplan.providers; see base.py for the contract.

Providers never import the CLI or the store: they take a LaunchRequest and return Instance values.
"""
