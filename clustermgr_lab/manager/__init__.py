"""The manager: the registry of this server's clusters, its configuration, the change feed and the store."""
