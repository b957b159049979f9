"""What every runtime shares: TLS credentials and private files, task cancellation, the Prometheus series."""
