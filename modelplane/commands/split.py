"""`python -m modelplane split URL [-n 200]`: how a service URL splits its traffic.

Sends N sequential chat completions to `URL/v1/chat/completions` and counts who served
each one (the mock engine's `X-Served-By`, else the "served by <replica>" text). Only
status and body are read; request and response headers are never printed, so a
credential added by a gateway cannot leak through this command.
"""
from __future__ import annotations

import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

UNIDENTIFIED = "(unidentified)"
_SERVED = re.compile(r"served by ([A-Za-z0-9._-]+)")
_HASHED = re.compile(r"^(.+)-([0-9a-f]{5}|\d+)$")


@dataclass
class SplitResult:
    url: str
    sequence: list[str | None] = field(default_factory=list)  # replica per request, None = failed
    deployments: dict[str, str] = field(default_factory=dict)  # replica -> deployment
    errors: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(1 for r in self.sequence if r is None)

    @property
    def by_replica(self) -> Counter:
        return Counter(r for r in self.sequence if r is not None)

    @property
    def by_deployment(self) -> Counter:
        return Counter(self.deployments.get(r, r) for r in self.sequence if r is not None)


def _deployment_of(replica: str) -> str:
    m = _HASHED.match(replica)
    return m.group(1) if m else replica


def run_split(url: str, n: int = 200, model: str = "default", timeout: float = 10.0,
              client: httpx.Client | None = None, on_request=None) -> SplitResult:
    """Send n requests; `on_request(i, result)` runs after each (fault tests use it)."""
    target = url.rstrip("/") + "/v1/chat/completions"
    body = {"model": model, "messages": [{"role": "user", "content": "who are you?"}]}
    res = SplitResult(url)
    own = client is None
    client = client or httpx.Client(timeout=timeout)
    start = time.perf_counter()
    try:
        for i in range(n):
            replica = None
            try:
                r = client.post(target, json=body)
                if r.status_code == 200:
                    replica = r.headers.get("x-served-by")
                    if not replica:
                        m = _SERVED.search(r.text)
                        replica = m.group(1) if m else None
                    if replica:
                        res.deployments.setdefault(
                            replica, r.headers.get("x-modelplane-deployment") or _deployment_of(replica))
                    else:
                        # A success all the same, e.g. a SaaS provider that names no replica.
                        replica = UNIDENTIFIED
                        res.deployments.setdefault(replica, replica)
                else:
                    res.errors[f"HTTP {r.status_code}"] += 1
            except httpx.HTTPError as e:
                res.errors[type(e).__name__] += 1
            res.sequence.append(replica)
            if on_request is not None:
                on_request(i, res)
    finally:
        res.seconds = time.perf_counter() - start
        if own:
            client.close()
    return res


def _table(title: str, counts: Counter, total: int) -> list[str]:
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    width = max([len(title)] + [len(k) for k, _ in rows])
    lines = [f"  {title:<{width}}  {'requests':>8}  {'share':>7}"]
    for k, v in rows:
        lines.append(f"  {k:<{width}}  {v:>8}  {100.0 * v / total if total else 0:>6.1f}%")
    return lines


def format_result(res: SplitResult, idle: dict[str, str] | None = None) -> str:
    """`idle` (replica -> deployment) lists replicas to show even with 0 requests, so a
    drained replica reads as 60/0 rather than disappearing from the table."""
    total = len(res.sequence)
    replicas, deployments = res.by_replica, res.by_deployment
    for rep, dep in (idle or {}).items():
        replicas.setdefault(rep, 0)
        deployments.setdefault(dep, 0)
    lines = [f"{res.url}: {total} requests in {res.seconds:.2f}s"]
    lines += _table("replica", replicas, total)
    lines += _table("deployment", deployments, total)
    detail = ", ".join(f"{k} x{v}" for k, v in sorted(res.errors.items()))
    lines.append(f"  failed: {res.failed}" + (f" ({detail})" if detail else ""))
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("split", help="send N requests through a service URL and count who served them")
    p.add_argument("url", help="service URL, e.g. http://127.0.0.1:8000/ml-team/chat")
    p.add_argument("-n", type=int, default=200, help="number of requests (default 200)")
    p.add_argument("--model", default="default", help="model name sent in the request body")
    p.add_argument("--timeout", type=float, default=10.0, help="per-request timeout, seconds")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.n < 1:
        print("split: -n must be at least 1", file=sys.stderr)
        return 2
    if not args.url.startswith(("http://", "https://")):
        print(f"split: not an http(s) URL: {args.url}", file=sys.stderr)
        return 2
    res = run_split(args.url, args.n, args.model, args.timeout)
    print(format_result(res))
    return 1 if res.failed else 0
