"""The LLM layer end to end over the example data: concepts and typed relations extracted under an
ontology, a cited answer, and a model-written read-only query.

    python examples/llm_layer.py

With OPENAI_API_KEY set, a real model does the work (OPENAI_MODEL, default gpt-4o-mini;
OPENAI_BASE_URL for any OpenAI-compatible server: Ollama, vLLM, Azure). Without it, the script
starts surreal_kgrag.llm.scripted.ScriptedChatServer on 127.0.0.1 and answers every request with a
rule-based stand-in written in this file: NOT a model (it spots a fixed list of names, reads a few
sentence patterns, and cites the passage sentence sharing most words with the question).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from surreal_kgrag import IngestConfig, Ingestor, SurrealStore, make_retriever
from surreal_kgrag.llm import LLMExtractor, LLMSettings, Ontology, answer, text_to_surql
from surreal_kgrag.llm.scripted import ScriptedChatServer, first_user_message
from surreal_kgrag.tools import ConceptRelations, ToolDispatcher

HERE = Path(__file__).resolve().parent
QUESTION = "Which element did Marie Curie name after her native country?"
QUERY_QUESTION = "Who was born where?"

# -- the stand-in (not a model) --------------------------------------------------------------------

NAMES = {
    "Marie Curie": "person", "Marie Skłodowska-Curie": "person", "Pierre Curie": "person", "Alfred Nobel": "person",
    "Henri Becquerel": "person", "Warsaw": "city", "Paris": "city", "Stockholm": "city", "Oslo": "city",
    "Poland": "country", "Sweden": "country", "Norway": "country", "polonium": "element", "radium": "element",
    "nobelium": "element", "Nobel Prize": "award", "dynamite": "invention", "University of Paris": "organisation",
}
PERSON_ALIASES = {"She": "Marie Curie", "He": "Alfred Nobel"}
PATTERNS = [
    (r"({person}).*? born in ({place})", "born_in"),
    (r"({place}) is the capital .*?of ({place})", "capital_of"),
    (r"({person}).*? discovered .*?(polonium|radium)", "discovered"),
    (r"({person}).*? invent\w* (dynamite)", "invented"),
    (r"named (polonium|nobelium) after .*?({place}|{person}|him)", "named_after"),
]


def stand_in(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    if system.startswith("You extract"):
        return json.dumps(_extract(first_user_message(request)))
    if system.startswith("You answer"):
        return json.dumps(_answer(request["messages"][1]["content"]))
    return json.dumps({"query": "SELECT in.name AS person, out.name AS place FROM RELATES_TO WHERE type = 'born_in' ORDER BY person"})


def _extract(text: str) -> dict[str, Any]:
    found = [{"name": n, "kind": k} for n, k in NAMES.items() if re.search(rf"\b{re.escape(n)}\b", text)]
    people = "|".join(map(re.escape, [n for n, k in NAMES.items() if k == "person"] + list(PERSON_ALIASES)))
    places = "|".join(map(re.escape, [n for n, k in NAMES.items() if k in ("city", "country")]))
    relations = []
    for sentence in re.split(r"(?<=\.)\s+", " ".join(text.split())):
        for pattern, relation in PATTERNS:
            match = re.search(pattern.format(person=people, place=places), sentence)
            if match:
                subject, obj = (PERSON_ALIASES.get(g, g) for g in match.groups())
                obj = "Alfred Nobel" if obj == "him" else obj
                relations.append({"subject": subject, "relation": relation, "object": obj})
    names = {c["name"] for c in found} | {r["subject"] for r in relations} | {r["object"] for r in relations}
    found += [{"name": n, "kind": NAMES[n]} for n in names - {c["name"] for c in found} if n in NAMES]
    return {"concepts": found, "relations": relations}


def _answer(prompt: str) -> dict[str, Any]:
    question = set(re.findall(r"\w+", prompt.rsplit("Question:", 1)[-1].lower()))
    best = (0, "", "")
    for match in re.finditer(r"\[\d+\] Title: (.*?)\n(.*?)(?=\n\n\[\d+\] Title: |\n\nQuestion: )", prompt, re.S):
        for sentence in re.split(r"(?<=\.)\s+", match.group(2)):
            score = len(question & set(re.findall(r"\w+", sentence.lower())))
            best = max(best, (score, match.group(1), sentence))
    if not best[0]:
        return {"answer": "", "supporting": []}
    return {"answer": best[2], "supporting": [{"title": best[1], "sentence": best[2]}]}


# -- the example -----------------------------------------------------------------------------------


def settings(base_url: str | None) -> LLMSettings:
    if base_url is None:
        return LLMSettings(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return LLMSettings(model="stand-in", base_url=base_url, api_key="local")


def run(llm: LLMSettings, label: str) -> None:
    print(f"model: {label}")
    ontology = Ontology.from_file(HERE / "ontology.yaml")
    with tempfile.TemporaryDirectory() as cache_dir, SurrealStore("mem://") as store:
        extractor = LLMExtractor(llm, ontology=ontology, cache=Path(cache_dir) / "extractions.sqlite3")
        ingestor = Ingestor(store, extractor=extractor, config=IngestConfig(metadata_concepts=("title",)))
        summary = ingestor.ingest(HERE / "data")
        usage, stats = summary.llm, extractor.stats
        assert usage is not None
        print(f"ingested {summary.added} documents, {summary.chunks} chunks, {usage.relations} typed relations; extraction: "
              f"{usage.requests} requests, {usage.prompt_tokens + usage.completion_tokens} tokens, {usage.cache_hits} cache hits, "
              f"{stats.concepts_rejected} concepts and {stats.relations_rejected} relations outside the ontology dropped")
        found = ToolDispatcher(store, embedder=ingestor.embedder).invoke("concept_relations", {"concept": "polonium"})
        assert isinstance(found, ConceptRelations)
        for relation in found.relations:
            print(f"   {relation.subject} -{relation.type}-> {relation.object}   ({relation.document_title})")

        result = answer(QUESTION, make_retriever("hybrid", store, embedder=ingestor.embedder, k=3), llm)
        print(f"\nQ: {QUESTION}\nA: {result.answer}")
        for title, sentence in result.supporting.items():
            print(f"   [{title}] {sentence}")
        print(f"   ({result.dropped_citations} citation(s) dropped as not found in the retrieved text)")

        query = text_to_surql(QUERY_QUESTION, store, llm)
        print(f"\nQ: {QUERY_QUESTION}\n   {query.statement}")
        for row in query.rows:
            print(f"   {row}")


def main() -> int:
    if os.environ.get("OPENAI_API_KEY"):
        run(settings(None), os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
        return 0
    with ScriptedChatServer(stand_in) as server:
        run(settings(server.base_url), "scripted stand-in on 127.0.0.1, not a model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
