"""The service's parts on their own: the evidence graph, the rate limiter, ids, the call log."""

from __future__ import annotations

import pytest

from kgqa.llm.calls import MAX_TEXT, CallLog
from kgqa.service.graph import evidence_graph
from kgqa.service.guard import RateLimiter, _loopback_host
from kgqa.service.runs import BadId, check_qid, check_run_id

YEAR = '"2010"^^<http://www.w3.org/2001/XMLSchema#gYear>'


def test_graph_from_triples_and_paths_marks_every_kind() -> None:
    from kgqa.kg import open_kg

    kg = open_kg("demo")
    evidence = [
        ["m.0demo_inception", "film.film.starring", "m.0demo_cvt_perf_inception_1", "film.performance.actor",
         "m.0demo_leonardo_dicaprio"],
        ["m.0demo_inception", "film.film.initial_release_date", YEAR],
        ["m.0demo_inception", "film.film.starring", "m.0demo_cvt_perf_inception_1"],  # repeated edge: drawn once
        ["too", "short"],
        ["odd", "length", "row", "x"],
    ]
    graph = evidence_graph(evidence, topics=["m.0demo_inception"], answers=[("m.0demo_leonardo_dicaprio", "Leonardo")],
                           kg=kg)
    kinds = {n["id"]: n["kind"] for n in graph["nodes"]}
    assert kinds == {"m.0demo_inception": "topic", "m.0demo_cvt_perf_inception_1": "cvt",
                     "m.0demo_leonardo_dicaprio": "answer", YEAR: "literal"}
    labels = {n["id"]: n["label"] for n in graph["nodes"]}
    assert labels[YEAR] == "2010" and labels["m.0demo_inception"] == "Inception"
    assert len(graph["edges"]) == 3 and not graph["truncated"]


def test_graph_without_a_kg_uses_known_names_and_literal_answers() -> None:
    graph = evidence_graph([["x:a", "r", YEAR]], topics=["x:a"], answers=[(None, "2010")],
                           known_names={"x:a": "Topic A"})
    assert [(n["label"], n["kind"]) for n in graph["nodes"]] == [("Topic A", "topic"), ("2010", "answer")]


def test_graph_is_cut_at_the_edge_cap() -> None:
    evidence = [["a", "r", f"n{i}"] for i in range(20)]
    graph = evidence_graph(evidence, max_edges=5)
    assert len(graph["edges"]) == 5 and graph["truncated"]


def test_rate_limiter_refills_over_time() -> None:
    now = [0.0]
    limiter = RateLimiter(60, clock=lambda: now[0])  # one a second, bursts of 60
    assert all(limiter.take("a") == 0 for _ in range(60))
    assert limiter.take("a") == pytest.approx(1.0)
    assert limiter.take("b") == 0  # per client
    now[0] += 2.0
    assert limiter.take("a") == 0 and limiter.take("a") == 0 and limiter.take("a") > 0


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1:8765", True), ("localhost", True), ("[::1]:80", True),
                                                ("evil.example", False), ("127.0.0.1.evil.example", False),
                                                ("", False), ("10.0.0.1:8765", False)])
def test_loopback_host_headers(host: str, loopback: bool) -> None:
    assert _loopback_host(host) is loopback


@pytest.mark.parametrize("run", ["..", ".", "a/b", "a\\b", "../x", "a..b", "", ".hidden", "x" * 200, "a\x00"])
def test_bad_run_ids(run: str) -> None:
    with pytest.raises(BadId):
        check_run_id(run)


@pytest.mark.parametrize("qid", ["..", ".", "a/b", "a\\b", "", "a\nb", "x" * 300])
def test_bad_question_ids(qid: str) -> None:
    with pytest.raises(BadId):
        check_qid(qid)


def test_good_ids() -> None:
    assert check_run_id("ccor-metaqa_2hop.dev+v2") and check_qid("WebQTest-1_3f2a:b c")


def test_call_log_cuts_long_text() -> None:
    log = CallLog()
    log.add([{"role": "user", "content": "x" * (MAX_TEXT + 50)}], {"step": "s"}, None, RuntimeError("down"), 0.5)
    call = log.calls[0]
    assert call["step"] == "s" and call["error"] == "RuntimeError: down" and call["reply"] is None
    assert call["messages"][0]["content"].endswith("(50 more characters not kept)")
