"""AWS EC2: the provider, EC2's rules as gpuplan applies them, and run secrets in SSM Parameter Store."""
