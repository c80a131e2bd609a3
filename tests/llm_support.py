"""Shared pieces of the LLM tests: a small corpus whose documents share concepts, an ontology, and a
scripted "model" for the OpenAI-compatible test server.

The scripted extraction model is a rule-based stand-in: it names the gazetteer entries a passage
contains and reads relations from a few sentence patterns. It also makes the mistakes a model
makes, on purpose: kinds outside the ontology (dynamite is an ``invention``), a relation type the
ontology lacks (``invented``) and a relation with its roles swapped (``capital_of`` from the
country to the city).
"""

from __future__ import annotations

import json
import re
from typing import Any

from surreal_kgrag.llm.scripted import Reply, first_user_message

CORPUS = {
    "marie": (
        "Marie Curie",
        "Marie Curie was born in Warsaw. She studied physics in Paris at the Sorbonne. "
        "Marie Curie discovered polonium with Pierre Curie. Marie Curie discovered radium in Paris. "
        "Marie Curie won the Nobel Prize twice. Marie Curie married Pierre Curie in Paris.",
    ),
    "pierre": (
        "Pierre Curie",
        "Pierre Curie was born in Paris. Pierre Curie studied magnetism at the Sorbonne. "
        "Pierre Curie married Marie Curie. Pierre Curie discovered radium with Marie Curie. "
        "Pierre Curie won the Nobel Prize with Marie Curie.",
    ),
    "warsaw": (
        "Warsaw",
        "Warsaw is the capital of Poland. The Vistula flows through Warsaw. "
        "Marie Curie was born in Warsaw. Polonium is named after Poland.",
    ),
    "paris": (
        "Paris",
        "Paris is the capital of France. The Sorbonne is a university in Paris. "
        "Marie Curie and Pierre Curie worked in Paris.",
    ),
    "nobel": (
        "Alfred Nobel",
        "Alfred Nobel was born in Stockholm. Alfred Nobel invented dynamite. "
        "Stockholm is the capital of Sweden. The Nobel Prize is awarded in Stockholm.",
    ),
    "radium": (
        "Radium",
        "Radium was discovered by the Curies. Marie Curie discovered radium. "
        "Radium glows in the dark. Polonium and radium are radioactive elements.",
    ),
}

GAZETTEER = {
    "Marie Curie": "person",
    "Pierre Curie": "person",
    "Alfred Nobel": "person",
    "Warsaw": "city",
    "Paris": "city",
    "Stockholm": "city",
    "Poland": "country",
    "France": "country",
    "Sweden": "country",
    "polonium": "element",
    "radium": "element",
    "Nobel Prize": "award",
    "Sorbonne": "organisation",
    "Vistula": "river",
    "dynamite": "invention",
}

ONTOLOGY = {
    "concepts": {
        "person": "a human being",
        "city": "a city or town",
        "country": "a sovereign state",
        "element": "a chemical element",
        "award": "a prize",
        "organisation": "a university, company or other body",
        "river": None,
    },
    "relations": {
        "born_in": {"subject": ["person"], "object": ["city", "country"]},
        "capital_of": {"subject": ["city"], "object": ["country"]},
        "discovered": {"subject": ["person"], "object": ["element"]},
        "married_to": {"subject": ["person"], "object": ["person"]},
        "won": {"subject": ["person"], "object": ["award"]},
    },
}

_NAMES = "|".join(sorted(map(re.escape, GAZETTEER), key=len, reverse=True))
PATTERNS = [
    (re.compile(rf"({_NAMES}) was born in ({_NAMES})", re.I), "born in"),
    (re.compile(rf"({_NAMES}) is the capital of ({_NAMES})", re.I), "capital of"),
    (re.compile(rf"({_NAMES}) discovered ({_NAMES})", re.I), "discovered"),
    (re.compile(rf"({_NAMES}) married ({_NAMES})", re.I), "married_to"),
    (re.compile(rf"({_NAMES}) won the ({_NAMES})", re.I), "won"),
    (re.compile(rf"({_NAMES}) invented ({_NAMES})", re.I), "invented"),
]


def canonical(name: str) -> str:
    return next(n for n in GAZETTEER if n.casefold() == name.casefold())


def scripted_extraction(text: str) -> dict[str, Any]:
    """What the scripted model answers for a passage (before any ontology check)."""
    concepts, seen = [], set()
    for match in re.finditer(_NAMES, text, re.I):
        name = canonical(match.group())
        if name not in seen:
            seen.add(name)
            concepts.append({"name": match.group(), "kind": GAZETTEER[name]})
    relations = []
    for pattern, relation in PATTERNS:
        for match in pattern.finditer(text):
            subject, obj = match.group(1), match.group(2)
            relations.append({"subject": subject, "relation": relation, "object": obj})
            if relation == "capital of":  # the swapped roles a model gets wrong
                relations.append({"subject": obj, "relation": "capital_of", "object": subject})
    return {"concepts": concepts, "relations": relations}


def extraction_responder(request: dict[str, Any]) -> Reply | str:
    return json.dumps(scripted_extraction(first_user_message(request)))


def passage_text(request: dict[str, Any]) -> str:
    return first_user_message(request)
