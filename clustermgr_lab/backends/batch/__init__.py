"""Batch backends: the scheduler next to the server (or as a job), each worker one batch job."""
