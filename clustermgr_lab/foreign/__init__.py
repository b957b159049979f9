"""Schedulers this server did not start: reaching them safely, and discovering those made in its kernels."""
