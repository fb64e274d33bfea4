"""The fleet as its clusters see it: observed capacity, verification, cluster health.

    readings = read.read_clusters({"eu-west": "eu-west.kubeconfig"}, timeout=5)   # the only I/O
    capacity = capacity.fleet_capacity(fleet, readings, previous)  # -> place_fleet(observed=...)
    report = verify.verify(fleet, placement, readings)             # per replica: Ready, or why not
    plan = place.place_observed(fleet, previous_json, readings, now=time.time())   # all of it

Everything but `read` is pure, so `plan --observe`, `verify`, and the placement provider's
check() compute the same answers from the same objects. docs/observe.md has the rules.
This package module itself imports nothing, so the placement provider can name the keys
below without loading the scheduler at import time.
"""

# Keys next to the placement: in `plan --observe --json` and in the placement resource's state.
CAPACITY_KEY = "capacity"
HEALTH_KEY = "health"
# Seconds each cluster gets to answer one read (the preview's bound per cluster).
DEFAULT_READ_TIMEOUT_S = 5.0
