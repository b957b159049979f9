"""Code loaded into other processes: the scheduler preload, the worker preload, and the one kernels' schedulers load."""
