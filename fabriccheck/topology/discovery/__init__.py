"""Importing topologies from what the fabric reports: ibnetdiscover (InfiniBand), LLDP (RoCE)."""
