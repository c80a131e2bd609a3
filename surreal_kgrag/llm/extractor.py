"""Concepts and typed relations extracted by a chat model, optionally under an ontology.

:class:`LLMExtractor` is a drop-in concept extractor (``extract(texts)``, the protocol the ingest
uses) that also returns relations (``extract_graph(texts)``). Per chunk: the cache is looked up;
misses are sent to the model, at most ``max_concurrency`` at a time, each retried on 429/5xx and
timeouts by the client; a reply that is not the expected JSON is sent back once with the
validation error (``repair_attempts``); what still fails is handed to the fallback extractor
(spaCy by default) with a warning. One bad reply never stops a run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import warnings
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..checks import check_texts
from ..errors import ConfigurationError, KGRagError, ModelNotAvailableError
from ..extract import ConceptExtractor, normalise_concept, resolve_extractor
from ..models import ConceptMention
from ..retrieval.plan import Call, Gather, Plan, arun, run
from .cache import ExtractionCache, resolve_cache
from .client import CHAT, ChatReply, LLMCallError, LLMClient, LLMReplyError, Message, chat, parse_reply
from .extraction import ChunkExtraction, ExtractionReply, ExtractionStats, GraphExtraction, Relation
from .ontology import Ontology, load_ontology, relation_key
from .settings import LLMSettings

logger = logging.getLogger(__name__)

PROMPT_VERSION = 1  # part of every cache key: bump when the prompt's meaning changes
UNLISTED = "unlisted:"
"""Prefix of the kind of a concept kept under ``on_violation="flag"`` although the ontology has no such kind."""


class LLMExtractionWarning(UserWarning):
    """Some chunks were extracted by the fallback extractor because the model's reply failed."""


# -- settings --------------------------------------------------------------------------------------

SYSTEM_PROMPT = """You extract a knowledge graph from a passage of text.
List the concepts the passage mentions (named entities and the key terms it is about) and the relations
between them that the passage states. Write each concept's name as the passage writes it. Every relation's
subject and object must be the name of a concept you list. Do not infer facts the passage does not state.
Reply with one JSON object and nothing else:
{"concepts": [{"name": "...", "kind": "..."}], "relations": [{"subject": "...", "relation": "...", "object": "..."}]}"""

FREE_KINDS = "Use a short upper-case kind such as PERSON, ORG, PLACE, EVENT, WORK, DATE or TOPIC, and a short snake_case relation."


class ExtractorConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ontology: Ontology | None = None
    on_violation: Literal["reject", "flag"] = Field(
        "reject", description="out-of-ontology concepts and relations: dropped (reject) or kept and marked (flag)"
    )
    relations: bool = Field(True, description="ask for relations too (False: concepts only, a shorter reply)")
    max_concepts: int = Field(30, ge=1, le=500, description="concepts asked for, and kept, per chunk")
    max_relations: int = Field(30, ge=0, le=500, description="relations kept per chunk")
    repair_attempts: int = Field(1, ge=0, le=3, description="times an invalid reply is sent back with the error")
    system_prompt: str = SYSTEM_PROMPT

    def prompt(self) -> str:
        parts = [self.system_prompt, f"List at most {self.max_concepts} concepts."]
        if not self.relations:
            parts.append('Leave "relations" empty.')
        parts.append(self.ontology.describe() if self.ontology else FREE_KINDS)
        if self.ontology:
            parts.append("Only use the kinds and relation types listed; leave out anything that does not fit them.")
        return "\n\n".join(parts)


# -- the extractor ---------------------------------------------------------------------------------


class LLMExtractor:
    """Concepts (and relations) of each text, extracted by an OpenAI-compatible chat model.

    >>> extractor = LLMExtractor(LLMSettings(model="gpt-4o-mini"), ontology="ontology.yaml")
    >>> Ingestor(store, extractor=extractor)

    ``cache``: ``"auto"`` (a SQLite file in the user cache folder, see :mod:`.cache`), a file path,
    an :class:`ExtractionCache`, or None. ``fallback``: the extractor for chunks whose reply failed,
    ``"spacy"`` (the default spaCy extractor, loaded when first needed), any concept extractor, or
    None (no concepts for those chunks). ``stats`` adds up every run of this object.
    """

    def __init__(
        self,
        llm: LLMSettings | LLMClient,
        *,
        ontology: Ontology | str | Any = None,
        on_violation: Literal["reject", "flag"] = "reject",
        relations: bool = True,
        cache: ExtractionCache | str | Any = "auto",
        fallback: ConceptExtractor | str | None = "spacy",
        config: ExtractorConfig | None = None,
    ) -> None:
        self.client = llm if isinstance(llm, LLMClient) else LLMClient(llm)
        if config is None:
            config = ExtractorConfig(ontology=load_ontology(ontology), on_violation=on_violation, relations=relations)
        elif ontology is not None:
            raise ConfigurationError("pass the ontology either in config or as ontology=, not both")
        self.config = config
        self.cache = resolve_cache(cache)
        self._fallback_spec = fallback
        self._fallback: ConceptExtractor | None = None
        self._stats = ExtractionStats()
        self._lock = threading.Lock()
        self._prompt = config.prompt()
        s = self.client.settings
        self.fingerprint = hashlib.sha256(
            json.dumps(
                {"v": PROMPT_VERSION, "model": s.model, "temperature": s.temperature, "max_tokens": s.max_tokens,
                 "format": s.reply_format, "prompt": self._prompt},
                sort_keys=True,
            ).encode()
        ).hexdigest()

    def __repr__(self) -> str:
        ontology = f", ontology={len(self.config.ontology.concepts)} kinds" if self.config.ontology else ""
        return f"LLMExtractor(model={self.client.settings.model!r}{ontology})"

    @property
    def stats(self) -> ExtractionStats:
        """Counts and token usage of every run so far (a copy)."""
        with self._lock:
            return self._stats.model_copy(deep=True)

    # -- public API ------------------------------------------------------------------------------

    def extract(self, texts: Sequence[str]) -> list[list[ConceptMention]]:
        """Concepts of each text, one list per text, in input order (the ingest's extractor protocol)."""
        return [chunk.mentions for chunk in self.extract_graph(texts).chunks]

    async def aextract(self, texts: Sequence[str]) -> list[list[ConceptMention]]:
        return [chunk.mentions for chunk in (await self.aextract_graph(texts)).chunks]

    def extract_graph(self, texts: Sequence[str]) -> GraphExtraction:
        """Concepts and relations of each text, with the counts of this call."""
        return run(None, self.graph_plan(texts))

    async def aextract_graph(self, texts: Sequence[str]) -> GraphExtraction:
        return await arun(None, self.graph_plan(texts))

    def graph_plan(self, texts: Sequence[str]) -> Plan[GraphExtraction]:
        """:meth:`extract_graph` as a plan, for other plans to ``yield from``."""
        return self._record((yield from self._plan(check_texts(texts, call="extract()", single="wrap a single text in a list"))))

    def key(self, text: str) -> str:
        """The cache key of ``text`` under these settings."""
        return hashlib.sha256(f"{self.fingerprint}\x00{text}".encode("utf-8", "surrogatepass")).hexdigest()

    # -- the plan --------------------------------------------------------------------------------

    def _plan(self, texts: list[str]) -> Plan[GraphExtraction]:
        stats = ExtractionStats(chunks=len(texts))
        keys = [self.key(text) for text in texts]
        replies: dict[int, tuple[ExtractionReply, Literal["llm", "cache"]]] = {}
        cache = self.cache
        if cache is not None and texts:
            cached: dict[str, str] = yield Call(lambda: cache.get_many(keys))
            for i, key in enumerate(keys):
                if key in cached:
                    try:
                        replies[i] = (parse_reply(cached[key], ExtractionReply), "cache")
                    except LLMReplyError:
                        pass  # written by another version: ask again
        failures = yield from self._ask(texts, [i for i in range(len(texts)) if i not in replies], replies, stats)
        fresh = {keys[i]: reply.model_dump_json() for i, (reply, source) in replies.items() if source == "llm"}
        if cache is not None and fresh:
            yield Call(lambda: cache.put_many(fresh))
        fallback_mentions: dict[int, list[ConceptMention]] = {}
        if failures:
            failed = sorted(failures)
            found = yield Call(lambda: self._run_fallback([texts[i] for i in failed]))
            fallback_mentions = dict(zip(failed, found))
            stats.fallbacks += len(failed)
            warnings.warn(
                f"{self!r}: extraction failed for {len(failed)} of {len(texts)} chunks (first: {failures[failed[0]]}); "
                f"used {'no extractor' if self._fallback is None else repr(self._fallback)} for them",
                LLMExtractionWarning,
                stacklevel=4,
            )
        chunks = []
        for i, text in enumerate(texts):
            if i in fallback_mentions:
                chunks.append(ChunkExtraction(mentions=fallback_mentions[i], source="fallback"))
                continue
            reply, source = replies[i]
            if source == "cache":
                stats.from_cache += 1
            else:
                stats.from_llm += 1
            chunks.append(self._chunk(text, reply, source, stats))
        return GraphExtraction(chunks=chunks, stats=stats)

    def _ask(
        self,
        texts: list[str],
        todo: list[int],
        replies: dict[int, tuple[ExtractionReply, Literal["llm", "cache"]]],
        stats: ExtractionStats,
    ) -> Plan[dict[int, str]]:
        """Send the chunks in ``todo`` to the model, then invalid replies back with their error;
        fills ``replies`` and returns the reason each chunk that is still without one failed."""
        conversations: dict[int, list[Message]] = {
            i: [{"role": "system", "content": self._prompt}, {"role": "user", "content": texts[i]}] for i in todo
        }
        failures: dict[int, str] = {}
        limit = self.client.settings.max_concurrency
        for round_ in range(self.config.repair_attempts + 1):
            if not conversations:
                break
            order = list(conversations)
            answers = yield Gather(tuple(chat(self.client, conversations[i], ExtractionReply) for i in order), limit, CHAT)
            retry: dict[int, list[Message]] = {}
            for i, answer in zip(order, answers):
                if isinstance(answer, LLMCallError):
                    stats.usage.add(answer.usage)
                    stats.failed_requests += 1
                    failures[i] = str(answer)
                    logger.debug("extraction request failed for chunk %d: %s", i, answer)
                    continue
                if isinstance(answer, KGRagError):
                    raise answer  # a configuration problem (no API key...), not a bad reply
                assert isinstance(answer, ChatReply)
                stats.usage.add(answer.usage)
                try:
                    replies[i] = (parse_reply(answer.content, ExtractionReply), "llm")
                except LLMReplyError as error:
                    stats.malformed_replies += 1
                    failures[i] = str(error)
                    retry[i] = [
                        *conversations[i],
                        {"role": "assistant", "content": answer.content},
                        {"role": "user", "content": f"That reply is not valid: {error}. Reply again with the JSON object only."},
                    ]
                    continue
                failures.pop(i, None)
                stats.repaired += int(round_ > 0)
            conversations = retry
        return failures

    def _run_fallback(self, texts: list[str]) -> list[list[ConceptMention]]:
        extractor = self._fallback_extractor()
        return extractor.extract(texts) if extractor is not None else [[] for _ in texts]

    def _fallback_extractor(self) -> ConceptExtractor | None:
        with self._lock:
            if self._fallback is None and self._fallback_spec is not None:
                spec = None if self._fallback_spec == "spacy" else self._fallback_spec
                try:
                    self._fallback = resolve_extractor(spec)
                except ModelNotAvailableError as error:
                    warnings.warn(f"no fallback extractor ({error}); failed chunks get no concepts", LLMExtractionWarning, stacklevel=6)
                    self._fallback_spec = None
            return self._fallback

    def _record(self, result: GraphExtraction) -> GraphExtraction:
        with self._lock:
            self._stats.add(result.stats)
        return result

    # -- from a reply to mentions and relations --------------------------------------------------

    def _chunk(self, text: str, reply: ExtractionReply, source: Literal["llm", "cache"], stats: ExtractionStats) -> ChunkExtraction:
        ontology, flag = self.config.ontology, self.config.on_violation == "flag"
        kinds: dict[str, str] = {}  # concept name -> kind as given (for the role checks)
        found: dict[str, tuple[str, str]] = {}  # name -> (display, stored kind)
        rejected: set[str] = set()
        for concept in reply.concepts:
            name = normalise_concept(concept.name, keep_numeric=True)
            if name is None:
                stats.concepts_dropped += 1
                continue
            if name in found or name in rejected:
                continue
            if len(found) >= self.config.max_concepts:
                break
            kind = concept.kind.strip()
            if ontology is not None:
                canonical = ontology.kind(kind)
                if canonical is None and not flag:
                    stats.concepts_rejected += 1
                    rejected.add(name)
                    continue
                if canonical is None:
                    stats.concepts_flagged += 1
                kind = canonical or f"{UNLISTED}{kind}"
            kinds[name] = concept.kind.strip()
            found[name] = (" ".join(concept.name.split()), kind)

        relations: dict[tuple[str, str, str], Relation] = {}
        for item in reply.relations if self.config.relations else []:
            subject = normalise_concept(item.subject, keep_numeric=True)
            obj = normalise_concept(item.object, keep_numeric=True)
            if subject in rejected or obj in rejected:
                stats.relations_rejected += 1
                continue
            if subject is None or obj is None or subject not in found or obj not in found or subject == obj:
                stats.relations_dropped += 1
                continue
            kept = self._relation(subject, item.relation, obj, kinds, stats)
            if kept is not None and len(relations) < self.config.max_relations:
                relations.setdefault((kept.subject, kept.type, kept.object), kept)

        folded = text.casefold()
        mentions = [
            ConceptMention(name=name, display=display, kind=kind, count=max(1, folded.count(display.casefold())))
            for name, (display, kind) in found.items()
        ]
        order = {m.name: _first(folded, m.display.casefold(), len(text) + i) for i, m in enumerate(mentions)}
        mentions.sort(key=lambda m: order[m.name])
        return ChunkExtraction(mentions=mentions, relations=list(relations.values()), source=source)

    def _relation(self, subject: str, name: str, obj: str, kinds: dict[str, str], stats: ExtractionStats) -> Relation | None:
        ontology, flag = self.config.ontology, self.config.on_violation == "flag"
        key = relation_key(name)
        if not key:
            stats.relations_dropped += 1
            return None
        if ontology is None:
            return Relation(subject=subject, type=key, object=obj)
        relation = ontology.relation(name)
        violation: str | None
        if relation is None:
            violation = f"{key!r} is not a relation type of the ontology"
        else:
            violation = ontology.role_violation(relation, kinds[subject], kinds[obj])
        if violation is None:
            return Relation(subject=subject, type=key, object=obj)
        if not flag:
            stats.relations_rejected += 1
            return None
        stats.relations_flagged += 1
        return Relation(subject=subject, type=key, object=obj, in_ontology=False, violation=violation)


def _first(text: str, needle: str, missing: int) -> int:
    position = text.find(needle)
    return position if position >= 0 else missing
