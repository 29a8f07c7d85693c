"""A cluster's controller: the topology kept in etcd, pushed to the nodes, primaries watched
and failed over (`streamkeep cluster controller --etcd URL`)."""
