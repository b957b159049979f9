"""Code loaded into other processes: the scheduler preload, and the one kernels' schedulers load."""
