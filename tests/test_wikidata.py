"""The Wikidata flavour against local replays: MediaWiki API answers recorded in Wikidata's real format,
and a local Oxigraph endpoint holding real Wikidata statements in Wikidata's RDF layout."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from bare_oxigraph import BareOxigraph
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.store import ensure_store, rdf_files
from sparqlnav.settings import Settings
from sparqlnav.tools.lookup import entity, resolve, search

FIXTURES = Path(__file__).parent / "fixtures" / "wikidata"


class _MediaWiki(BaseHTTPRequestHandler):
    """Replays recorded api.php answers; records the requests it got."""

    requests: ClassVar[list[dict[str, list[str]]]] = []

    def do_GET(self) -> None:
        params = parse_qs(urlsplit(self.path).query)
        type(self).requests.append(params)
        action = params.get("action", [""])[0]
        if action == "wbsearchentities":
            name = "wbsearchentities_educated.json" if params["type"] == ["property"] else "wbsearchentities_douglas_adams.json"
            body = json.loads((FIXTURES / name).read_text())
            if params["type"] == ["property"] and "educated" not in params["search"][0]:
                body = {"searchinfo": {"search": params["search"][0]}, "search": [], "success": 1}
        elif action == "wbgetentities":
            every = json.loads((FIXTURES / "wbgetentities_labels.json").read_text())["entities"]
            wanted = params["ids"][0].split("|")
            body = {"entities": {i: every.get(i, {"id": i, "missing": ""}) for i in wanted}, "success": 1}
        else:
            body = {"error": {"code": "badvalue", "info": f"Unrecognized value for parameter \"action\": {action}."}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def wikidata(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeGraph]:
    home = tmp_path_factory.mktemp("wd")
    sparql = BareOxigraph(ensure_store(rdf_files(FIXTURES / "q42.ttl"), home / "stores").data_dir)
    sparql.ensure_running()
    api = ThreadingHTTPServer(("127.0.0.1", 0), _MediaWiki)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    settings = Settings.from_env(
        {
            "SPARQLNAV_HOME": str(home),
            "SPARQLNAV_WIKIDATA_SPARQL": sparql.url,
            "SPARQLNAV_WIKIDATA_API": f"http://127.0.0.1:{api.server_address[1]}/w/api.php",
        }
    )
    with open_kg("wikidata", settings) as kg:
        yield kg
    api.shutdown()
    sparql.stop()


def test_search_uses_wbsearchentities(wikidata: KnowledgeGraph) -> None:
    found = search(wikidata, "Douglas Adams")
    assert [h.iri for h in found.entities][:1] == ["http://www.wikidata.org/entity/Q42"]
    assert found.entities[0].description.startswith("English science fiction writer")
    assert found.entities[0].score > found.entities[1].score
    props = search(wikidata, "educated at")
    assert [h.iri for h in props.properties] == ["http://www.wikidata.org/entity/P69"]
    sent = _MediaWiki.requests
    assert any(r["action"] == ["wbsearchentities"] and r["type"] == ["item"] and r["language"] == ["en"] for r in sent)


def test_entity_page_gets_labels_from_the_api_and_shows_qualifiers(wikidata: KnowledgeGraph) -> None:
    assert resolve(wikidata, "Q42") == "http://www.wikidata.org/entity/Q42"
    assert resolve(wikidata, "wdt:P69") == "http://www.wikidata.org/prop/direct/P69"
    page = entity(wikidata, "http://www.wikidata.org/entity/Q42")
    edges = {e.property: e for e in page.edges}
    educated = edges["http://www.wikidata.org/prop/direct/P69"]
    assert educated.label == "educated at"
    college = educated.values[0]
    assert college.label == "St John's College"
    quals = {(q.property_label, q.value_label or q.value.value[:4]) for q in college.qualifiers}
    assert quals == {("start time", "1971"), ("end time", "1974"), ("academic degree", "Bachelor of Arts")}
    assert edges["http://www.wikidata.org/prop/direct/P31"].values[0].label == "human"
    assert page.label == "Douglas Adams"
    text = page.to_text(wikidata)
    assert "wdt:P69 (educated at)" in text and "pq:P580 (start time): 1971-01-01T00:00:00Z" in text
    batched = [r for r in _MediaWiki.requests if r["action"] == ["wbgetentities"]]
    assert batched and all(len(r["ids"][0].split("|")) <= 50 for r in batched)


def test_wikidata_sparql_goes_to_the_configured_endpoint(wikidata: KnowledgeGraph) -> None:
    q = "SELECT ?x WHERE { <http://www.wikidata.org/entity/Q42> <http://www.wikidata.org/prop/direct/P19> ?x }"
    res = wikidata.endpoint.query(q)
    assert res.table is not None and [r["x"].value for r in res.table.rows] == ["http://www.wikidata.org/entity/Q350"]
