"""The local runtime wing: what runs on 127.0.0.1 instead of on a cluster. The mock engine,
Traefik processes for both gateway hops (`process`), a whole local fleet (`fleet.LocalFleet`),
its autoscaling loop (`scaling.LocalScaler`), and the two stdlib scripts run by path (`watchdog`,
`listen_fds`). It builds on the pure core (the Traefik configuration in modelplane.gateway, the
scheduler, the reconcile pass); `demo`, `traffic`, the sim and the integration tests use it. The
core imports one module of it alone: `mock_engine` (stdlib only, importing nothing of ours), the one
home of the KV-cache model that modelplane.kvroute simulates."""
