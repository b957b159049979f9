"""Clusters of a dask-gateway server: created, found, scaled and stopped through its REST API, reached through its proxy."""
