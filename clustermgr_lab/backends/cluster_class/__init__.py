"""Clusters run by an object of any distributed Cluster class, held in the server's scheduler links' process."""
