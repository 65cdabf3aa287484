"""Microsoft Azure: GPU VM prices from the public Retail Prices API (prices.py, pricing.py, vm_sizes.py) and the
provider (provider.py): its declaration and, in its own modules, the VMs' lifecycle through the Azure SDK (the
`azure` extra, imported inside methods only)."""
