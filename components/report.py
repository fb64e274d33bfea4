"""The placement as people read it in `pulumi preview`: a table and one warning per
shortfall (pure formatting; the program logs it)."""

from __future__ import annotations

from typing import Any, Mapping

from components.deployment import explanations, replica_summary


def placement_table(placement: Mapping[str, Any]) -> str:
    rows = [("DEPLOYMENT", "REPLICA", "INDEX", "CLUSTER", "POOLS")]
    for dep in placement.get("deployments", []):
        ident = f"{dep['namespace']}/{dep['name']}"
        reps = replica_summary(dep)
        for rep in reps:
            pools = ",".join(f"{e}={'+'.join(p)}" for e, p in rep["pools"].items())
            rows.append((ident, rep["name"], str(rep["index"]), rep["cluster"], pools))
        if not reps:
            rows.append((ident, "-", "-", "-", "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "placement:\n" + "\n".join(lines)


def shortfalls(placement: Mapping[str, Any]) -> list[str]:
    """One message per deployment with fewer replicas placed than desired."""
    out = []
    for dep in placement.get("deployments", []):
        placed, desired = len(dep.get("replicas", [])), int(dep.get("desired", 0))
        if placed >= desired:
            continue
        lines = [f"ModelDeployment {dep['namespace']}/{dep['name']}: {placed} of {desired} replicas placed"]
        lines += [f"  {line}" for line in explanations(dep)]
        out.append("\n".join(lines))
    return out


def deployment_outputs(placement: Mapping[str, Any]) -> dict[str, dict]:
    return {f"{d['namespace']}/{d['name']}": {"desired": d.get("desired", 0), "replicas": replica_summary(d),
                                              "conditions": d.get("conditions", []),
                                              "explanations": explanations(d)}
            for d in placement.get("deployments", [])}
