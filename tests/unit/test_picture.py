"""`plan --html FILE` (issue 32, item 7): one self-contained page of the placement, checked by
parsing it (the page has no script, so what a browser shows is what its markup and stylesheet
say): nothing it could fetch, the numbers the placement has, every text escaped, bounded."""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from modelplane import picture
from modelplane.api import load_manifests
from modelplane.gateway.fleet import fleet_routes, placement_endpoints
from modelplane.scheduler import place_fleet

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / ".venv" / "bin" / "modelplane"
# Elements and attributes through which a page loads or runs something.
FETCHING_TAGS = {"script", "link", "img", "iframe", "object", "embed", "video", "audio", "source", "frame", "base",
                 "form", "svg", "picture", "track", "input"}
FETCHING_ATTRS = {"src", "href", "srcset", "action", "formaction", "poster", "data", "background", "ping"}


class Page(HTMLParser):
    """Elements as (tag, attributes, text directly inside), and the stylesheet's text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self.stack: list[int] = []
        self.style = ""
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}, []))
        if tag not in ("meta", "br"):
            self.stack.append(len(self.elements) - 1)

    def handle_endtag(self, tag):
        while self.stack:
            if self.elements[self.stack.pop()][0] == tag:
                break

    def handle_data(self, data):
        if self.stack:
            tag, _, texts = self.elements[self.stack[-1]]
            texts.append(data)
            if tag == "style":
                self.style += data

    def find(self, tag: str, **attrs: str) -> list[tuple[dict[str, str], str]]:
        return [(a, "".join(t)) for name, a, t in self.elements
                if name == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def text(self) -> str:
        return " ".join("".join(t) for _, _, t in self.elements)


def page_of(example: str, **kwargs) -> tuple[str, object, object]:
    fleet = load_manifests(REPO / "examples" / example)
    placement = place_fleet(fleet)
    return picture.placement_page(fleet, placement, "Device", **kwargs), fleet, placement


@pytest.mark.parametrize("example", ["kind", "silent-failures", "canary", "scheduler-fabric", "policy-budget"])
def test_the_page_fetches_nothing_and_runs_nothing(example):
    text, _, _ = page_of(example)
    page = Page(text)
    tags = {tag for tag, _, _ in page.elements}
    assert not tags & FETCHING_TAGS
    assert not [(tag, a) for tag, attrs, _ in page.elements for a in attrs if a in FETCHING_ATTRS or a.startswith("on")]
    assert "url(" not in page.style and "@import" not in page.style and "@font-face" not in page.style
    (csp,) = [a["content"] for a, _ in page.find("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert csp.startswith("default-src 'none'")
    assert not re.search(r"https?://|//[a-z]", text)


@pytest.mark.parametrize("example", ["kind", "silent-failures", "policy-spread"])
def test_the_grid_has_every_replica_where_the_placement_put_it(example):
    text, fleet, placement = page_of(example)
    page = Page(text)
    cells = [(a["data-cluster"], int(a["data-replicas"])) for a, _ in page.find("td") if "data-replicas" in a]
    assert len(cells) == len(placement.deployments) * len(fleet.clusters)
    expected = [(c, sum(r.cluster == c for r in d.replicas))
                for d in placement.deployments for c in sorted(fleet.clusters)]
    assert cells == expected


def test_pool_use_counts_what_the_replicas_claim():
    text, _, _ = page_of("silent-failures")
    page = Page(text)
    used = [int(a["data-used"]) for a, _ in page.find("td") if "data-used" in a]
    free = [int(a["data-free"]) for a, _ in page.find("td") if "data-free" in a]
    total = [int(a["data-total"]) for a, _ in page.find("td") if "data-total" in a]
    # nebius-eu/h100: 2 nodes x 8 GPUs, two llama-pd replicas of 4 + 4 GPUs; onprem/h100: 3 x 8, llama-70b's
    # leader and worker of 8 each.
    assert (used, free, total) == ([16, 16], [0, 8], [16, 24])


def test_node_accounting_counts_claiming_pods_as_nodes():
    fleet = load_manifests(REPO / "examples" / "silent-failures")
    uses = picture.pool_use(fleet, place_fleet(fleet, accounting="Node"), "Node")
    assert {(u.cluster, u.unit, u.total) for u in uses} == {("nebius-eu", "nodes", 2), ("onprem", "nodes", 3)}
    assert all(0 <= u.used <= u.total for u in uses)


def test_unplaced_replicas_carry_each_clusters_reason():
    text, _, placement = page_of("silent-failures")
    page = Page(text)
    d = next(d for d in placement.deployments if d.unplaced)
    first = d.unplaced[0]
    (item,) = [a for a, _ in page.find("li", data_index=str(first.index))]
    assert item
    shown = page.text()
    for cluster, reason in first.reasons.items():
        assert f"{cluster}: {reason.message}" in shown
    assert first.feasibility is not None and first.feasibility.message in shown


def test_routing_weights_are_the_routes():
    text, fleet, placement = page_of("kind")
    page = Page(text)
    (route,) = fleet_routes(fleet, placement_endpoints(fleet, placement))
    weights = [int(a["data-weight"]) for a, _ in page.find("td") if "data-weight" in a]
    assert weights == [b.weight for b in route.backends] == [9, 1]
    shares = [t for a, t in page.find("td") if a.get("class") == "n" and t.endswith("%")]
    assert shares == ["90.0%", "10.0%"]


def test_every_text_is_escaped():
    hostile = '<img src=x onerror="alert(1)"></title><script>alert(2)</script>&amp;'
    text, _, _ = page_of("kind", warnings=[hostile], title=hostile)
    page = Page(text)
    assert not {tag for tag, _, _ in page.elements} & FETCHING_TAGS
    assert page.find("title")[0][1] == hostile and page.find("h1")[0][1] == hostile
    assert hostile in [t for _, t in page.find("li")]


def test_a_large_fleet_is_a_list_not_a_grid(monkeypatch):
    monkeypatch.setattr(picture, "MAX_GRID_CELLS", 3)
    text, _, _ = page_of("kind")
    page = Page(text)
    assert not page.find("table", **{"class": "grid"})
    assert "ml-team/chat: 1 of 1 (eu-west: 1)" in [t for _, t in page.find("li")]


def _cli(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_cli_plan_html_writes_the_page_and_still_prints_the_plan(tmp_path):
    out = tmp_path / "placement.html"
    proc = _cli("plan", "examples/kind", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == _cli("plan", "examples/kind").stdout
    assert out.read_text().startswith("<!DOCTYPE html>") and list(tmp_path.iterdir()) == [out]
    to_stdout = _cli("plan", "examples/kind", "--html", "-")
    assert to_stdout.stdout == out.read_text()
    refused = _cli("plan", "examples/kind", "--html", str(tmp_path / "no" / "dir" / "x.html"))
    assert refused.returncode == 2 and refused.stderr.startswith("error: cannot write the page to ")
    assert "Traceback" not in refused.stderr
