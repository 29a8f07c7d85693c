"""Spark batch export of snapshots (issue 16): the `streamkeep` PySpark data source
(datasource; imports pyspark) and pinning the snapshot a read sees (pin; no pyspark).

Reads go through the snapshot read API only. Must not touch: the snapshot format, the engine.
"""
