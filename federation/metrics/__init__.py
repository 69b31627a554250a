"""Prometheus metrics of the central service and the agent (docs/design/observability.md).

``instruments`` holds what code paths count as they run (rounds, submissions, dispatch);
``gauges`` computes the state gauges (jobs, queues, clusters, streams) at scrape time;
``exporter`` serves ``/metrics`` on ``--metrics-listen``. Only this package imports
``prometheus_client``, so the rest of the service sees small methods, and the agent
reuses the exporter.
"""
