"""The placement as one self-contained HTML page (`modelplane plan --html FILE`): clusters by
deployments with the replicas placed in each cell, every pool's devices used and free, every
unplaced replica with each cluster's reason, and every ModelService's routing weights.

No script, no font, no image, nothing fetched: the page is markup and one inline stylesheet, and
its Content-Security-Policy forbids every other source (`default-src 'none'`), so it opens from a
file, a CI artifact or a mail attachment alike and shows the same. Every text comes from the
fleet or the placement and is escaped. Bounded: a grid past MAX_GRID_CELLS becomes one line per
deployment, and long lists are cut with a count of what was left out.

Devices used are what the placed replicas' members claim (pods x devices per pod, DRA requests
only, as the ledger charges them in Device accounting; claiming pods in Node accounting, where a
pod takes a node); free is the pool's declared (or observed) size minus that.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from modelplane.api import Fleet
from modelplane.gateway.fleet import fleet_routes, placement_endpoints
from modelplane.scheduler import FleetPlacement
from modelplane.scheduler.refusals import refusal_lines
from modelplane.scheduler.shape import compile_clusters, compile_deployment
from modelplane.words import counted

MAX_GRID_CELLS = 20_000
MAX_LIST = 50          # names in one cell, reasons of one replica, unplaced replicas of one deployment

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1b1f24; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #c8ccd1; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f1f3f5; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.empty { color: #9aa0a6; text-align: center; }
td.full { background: #e6f4ea; } td.part { background: #fef7e0; } td.none { background: #fce8e6; }
.bar { width: 12em; height: .8em; background: #e6e9ec; display: inline-block; vertical-align: middle; }
.bar > span { display: block; height: 100%; background: #1a73e8; }
small, .muted { color: #5f6368; }
code { font-size: .95em; }
"""


@dataclass(frozen=True)
class PoolUse:
    cluster: str
    pool: str
    class_name: str
    nodes: int
    unit: str           # "devices" | "nodes"
    total: int
    used: int

    @property
    def free(self) -> int:
        return self.total - self.used


def pool_use(fleet: Fleet, placement: FleetPlacement, accounting: str,
             observed: Mapping[str, Mapping[str, int]] | None = None) -> list[PoolUse]:
    """Every pool's capacity and what the placed replicas claim of it."""
    clusters = compile_clusters(fleet, observed)
    used: dict[tuple[str, str], int] = {}
    shapes = {key: compile_deployment(fleet, key, dep) for key, dep in fleet.deployments.items()}
    for d in placement.deployments:
        shape = shapes.get((d.namespace, d.name))
        if shape is None:
            continue
        for r in d.replicas:
            for name, e in r.engines.items():
                engine = shape.engine(name)
                if engine is None:
                    continue
                pools = e.pools_for(len(engine.members))
                for m, member in enumerate(engine.members):
                    per_pod = sum(q.count for q in e.requests[m]) if m < len(e.requests) else 0
                    if not per_pod:
                        continue
                    take = member.pod_count if accounting == "Node" else member.pod_count * per_pod
                    key = (r.cluster, pools[m])
                    used[key] = used.get(key, 0) + take
    out = []
    for name, cluster in clusters.items():
        for pool in cluster.pools:
            per_node = sum(d.count for d in pool.cls.devices if d.dra)
            unit, total = ("nodes", pool.nodes) if accounting == "Node" else ("devices", pool.nodes * per_node)
            out.append(PoolUse(name, pool.name, pool.cls.name, pool.nodes, unit, total, used.get((name, pool.name), 0)))
    return out


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cut(items: Sequence[str], most: int = MAX_LIST) -> list[str]:
    return list(items[:most]) + ([f"... and {len(items) - most} more"] if len(items) > most else [])


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> list[str]:
    """A table of already escaped cells (a cell may carry its own `<td ...>`)."""
    out = [f'<table class="{cls}">' if cls else "<table>", "<thead><tr>"]
    out += [f'<th scope="col">{h}</th>' for h in header]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(c if c.startswith("<t") else f"<td>{c}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return out


def placement_page(fleet: Fleet, placement: FleetPlacement, accounting: str,
                   observed: Mapping[str, Mapping[str, int]] | None = None, warnings: Sequence[str] = (),
                   title: str = "Placement") -> str:
    clusters = sorted(fleet.clusters)
    desired = sum(d.desired for d in placement.deployments)
    placed = sum(len(d.replicas) for d in placement.deployments)
    body = [f"<h1>{_e(title)}</h1>",
            f'<p id="summary">{counted(len(placement.deployments), "deployment")}, '
            f'{counted(len(clusters), "cluster")}: {placed} of {counted(desired, "replica")} placed '
            f'({_e(accounting)} accounting).</p>']
    if warnings:
        body.append('<h2 id="warnings">Warnings</h2><ul>')
        body += [f"<li>{_e(w)}</li>" for w in _cut(list(warnings))]
        body.append("</ul>")
    body += _grid(placement, clusters)
    body += _capacity(pool_use(fleet, placement, accounting, observed))
    body += _unplaced(placement)
    body += _routes(fleet, placement)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{_e(title)}</title>\n"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _grid(placement: FleetPlacement, clusters: list[str]) -> list[str]:
    out = ['<h2 id="replicas">Replicas by cluster</h2>']
    if len(placement.deployments) * max(1, len(clusters)) > MAX_GRID_CELLS:
        out.append(f"<p class=\"muted\">{len(placement.deployments)} deployments x {len(clusters)} clusters: one "
                   "line per deployment instead of a grid.</p><ul>")
        for d in placement.deployments:
            per: dict[str, int] = {}
            for r in d.replicas:
                per[r.cluster] = per.get(r.cluster, 0) + 1
            where = ", ".join(_cut([f"{c}: {n}" for c, n in sorted(per.items())]))
            out.append(f"<li>{_e(d.namespace)}/{_e(d.name)}: {len(d.replicas)} of {d.desired} ({_e(where)})</li>")
        return out + ["</ul>"]
    rows = []
    for d in placement.deployments:
        by_cluster: dict[str, list[str]] = {}
        for r in d.replicas:
            by_cluster.setdefault(r.cluster, []).append(r.name)
        state = "full" if len(d.replicas) >= d.desired else "part" if d.replicas else "none"
        row = [f'<th scope="row">{_e(d.namespace)}/{_e(d.name)}</th>',
               f'<td class="n {state}" data-placed="{len(d.replicas)}">{len(d.replicas)} / {d.desired}</td>']
        for c in clusters:
            names = by_cluster.get(c, [])
            row.append(f'<td class="n" data-cluster="{_e(c)}" data-replicas="{len(names)}" '
                       f'title="{_e(", ".join(_cut(names)))}">{len(names)}</td>' if names
                       else f'<td class="empty" data-cluster="{_e(c)}" data-replicas="0">&middot;</td>')
        rows.append(row)
    return out + _table(["deployment", "placed", *(_e(c) for c in clusters)], rows, "grid")


def _capacity(uses: list[PoolUse]) -> list[str]:
    out = ['<h2 id="capacity">Pools: used and free</h2>']
    rows = []
    for u in uses:
        share = 100 * min(max(u.used, 0), u.total) // u.total if u.total > 0 else 0
        rows.append([_e(u.cluster), _e(u.pool), _e(u.class_name), f'<td class="n">{u.nodes}</td>', _e(u.unit),
                     f'<td class="n" data-used="{u.used}">{u.used}</td>',
                     f'<td class="n" data-free="{u.free}">{u.free}</td>',
                     f'<td class="n" data-total="{u.total}">{u.total}</td>',
                     f'<td><span class="bar" role="img" aria-label="{share}% used"><span style="width:{share}%">'
                     "</span></span></td>"])
    return out + _table(["cluster", "pool", "class", "nodes", "unit", "used", "free", "total", ""], rows, "capacity")


def _unplaced(placement: FleetPlacement) -> list[str]:
    out = ['<h2 id="unplaced">Unplaced replicas</h2>']
    short = [d for d in placement.deployments if d.unplaced]
    if not short:
        return [*out, "<p>None: every replica is placed.</p>"]
    for d in short:
        out.append(f"<h3>{_e(d.namespace)}/{_e(d.name)}: {counted(len(d.unplaced), 'replica')} unplaced</h3><ul>")
        for u in d.unplaced[:MAX_LIST]:
            verdict = f" <strong>{_e(u.feasibility.verdict)}</strong>: {_e(u.feasibility.message)}" \
                if u.feasibility is not None else ""
            lines = _cut(refusal_lines(u.refusals))
            out.append(f'<li data-index="{u.index}">replica #{u.index}:{verdict}<ul>'
                       + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul></li>")
        if len(d.unplaced) > MAX_LIST:
            out.append(f"<li>... and {len(d.unplaced) - MAX_LIST} more</li>")
        out.append("</ul>")
    return out


def _routes(fleet: Fleet, placement: FleetPlacement) -> list[str]:
    out = ['<h2 id="routing">Routing weights</h2>']
    routes = fleet_routes(fleet, placement_endpoints(fleet, placement))
    if not routes:
        return [*out, "<p>No ModelService.</p>"]
    for route in routes:
        low = min((b.priority for b in route.backends), default=0)    # the tier serving while all are healthy
        total = sum(b.weight for b in route.backends if b.priority == low)
        out.append(f'<h3 data-service="{_e(route.namespace)}/{_e(route.name)}">{_e(route.namespace)}/'
                   f"{_e(route.name)}</h3>")
        if not route.backends:
            out.append("<p>Nothing to route to.</p>")
            continue
        rows = []
        for b in route.backends[:MAX_LIST]:
            ep = b.endpoint
            share = f"{100 * b.weight / total:.1f}%" if total and b.priority == low else "standby"
            rows.append([_e(ep.name), _e(ep.cluster or ("external" if ep.external else "-")), _e(b.entry),
                         f'<td class="n">{b.priority}</td>', f'<td class="n" data-weight="{b.weight}">{b.weight}</td>',
                         f'<td class="n">{share}</td>'])
        out += _table(["backend", "cluster", "entry", "priority", "weight", "share"], rows, "routes")
    return out
