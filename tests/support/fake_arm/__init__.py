"""A local fake of Azure Resource Manager (and the VM-side Azure services) for the real Azure SDK clients."""
