"""Fleet-level prefix-cache-aware routing (issue 29): the engine model, the trace reader, the
clusters' published summaries, the routers and a discrete-event simulator to compare them.
Pure: no pulumi, no sockets, no clock (docs/kv-routing.md)."""
