"""``federation demo``: the central service, simulated clusters and agents over real gRPC
on loopback, a workload, a live view, a final report and a picture."""
