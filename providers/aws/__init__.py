"""gpuplan.providers.aws.provider"""
