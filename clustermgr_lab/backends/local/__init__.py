"""Processes on this machine: the local backend, the scheduler process, process tracking and the warm launcher."""
