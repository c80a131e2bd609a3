"""An ontology for extraction: which kinds of concept exist, which relation types, and which kinds
may fill the subject and the object of each relation.

Written as a pydantic model or a YAML/JSON file::

    concepts:
      person: a human being
      city: a city or town
      country:
    relations:
      born_in:
        subject: [person]
        object: [city, country]
      capital_of:
        description: the city is the seat of government of the country
        subject: [city]
        object: [country]

(``concepts`` may also be a list of names or of ``{name, description}``; ``relations`` a list of
``{name, subject, object, description}``.) Names are matched without regard to case, and relation
names also with spaces and hyphens read as ``_`` ("Born in" is ``born_in``). A relation with no
``subject`` (or ``object``) list accepts any kind in that role.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigurationError


def relation_key(name: str) -> str:
    """The form relation types are compared and stored in: lower case, words joined by ``_``."""
    return re.sub(r"[^0-9a-z]+", "_", name.casefold()).strip("_")


class ConceptKind(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    description: str = ""


class RelationType(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    description: str = ""
    subject: tuple[str, ...] = Field((), description="kinds allowed as the subject; empty: any kind")
    object: tuple[str, ...] = Field((), description="kinds allowed as the object; empty: any kind")

    @field_validator("name")
    @classmethod
    def _relation_name(cls, value: str) -> str:
        key = relation_key(value)
        if not key:
            raise ValueError(f"relation name {value!r} has no letters or digits")
        return key


class Ontology(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    concepts: tuple[ConceptKind, ...] = Field(min_length=1)
    relations: tuple[RelationType, ...] = ()

    @field_validator("concepts", mode="before")
    @classmethod
    def _concepts_shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return [{"name": name, "description": text or ""} for name, text in value.items()]
        if isinstance(value, (list, tuple)):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("relations", mode="before")
    @classmethod
    def _relations_shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return [{"name": name, **(spec or {})} for name, spec in value.items()]
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Ontology:
        kinds = [c.name.casefold() for c in self.concepts]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"concept kinds are listed twice: {sorted({k for k in kinds if kinds.count(k) > 1})}")
        names = [r.name for r in self.relations]
        if len(set(names)) != len(names):
            raise ValueError(f"relation types are listed twice: {sorted({n for n in names if names.count(n) > 1})}")
        known = set(kinds)
        for relation in self.relations:
            unknown = [k for k in (*relation.subject, *relation.object) if k.casefold() not in known]
            if unknown:
                raise ValueError(f"relation {relation.name!r} names kinds that are not concepts of the ontology: {unknown}")
        return self

    @classmethod
    def from_file(cls, path: str | Path) -> Ontology:
        """Read an ontology from a ``.yaml``/``.yml`` or ``.json`` file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigurationError(f"cannot read the ontology file {path}: {error}") from error
        data = _parse_yaml(path, text) if path.suffix.lower() in (".yaml", ".yml") else _parse_json(path, text)
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ConfigurationError(f"the ontology in {path} is invalid: {error}") from error

    # -- lookups -----------------------------------------------------------------------------------

    def kind(self, name: str) -> str | None:
        """The ontology's spelling of a concept kind, or None when it has no such kind."""
        wanted = name.strip().casefold()
        return next((c.name for c in self.concepts if c.name.casefold() == wanted), None)

    def relation(self, name: str) -> RelationType | None:
        key = relation_key(name)
        return next((r for r in self.relations if r.name == key), None)

    def role_violation(self, relation: RelationType, subject_kind: str, object_kind: str) -> str | None:
        """Why ``subject_kind -relation-> object_kind`` breaks the ontology, or None when it does not."""
        for role, allowed, kind in (("subject", relation.subject, subject_kind), ("object", relation.object, object_kind)):
            if allowed and kind.casefold() not in {k.casefold() for k in allowed}:
                return f"a {kind} cannot be the {role} of {relation.name} (allowed: {', '.join(allowed)})"
        return None

    # -- prompt and cache key ----------------------------------------------------------------------

    def describe(self) -> str:
        """The ontology as the extraction prompt states it."""
        lines = ["Concept kinds (use exactly these names):"]
        lines += [f"- {c.name}" + (f": {c.description}" if c.description else "") for c in self.concepts]
        if self.relations:
            lines.append("Relation types (subject kinds -> object kinds; use exactly these names):")
            for r in self.relations:
                subject = " | ".join(r.subject) or "any kind"
                obj = " | ".join(r.object) or "any kind"
                lines.append(f"- {r.name}: {subject} -> {obj}" + (f" ({r.description})" if r.description else ""))
        return "\n".join(lines)

    def fingerprint(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


def _parse_yaml(path: Path, text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigurationError(f"the ontology file {path} is not valid YAML: {error}") from error


def _parse_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigurationError(f"the ontology file {path} is not valid JSON: {error}") from error


def load_ontology(spec: Ontology | str | Path | dict[str, Any] | None) -> Ontology | None:
    """An ontology from a model, a dict, or the path of a YAML/JSON file; None stays None."""
    if spec is None or isinstance(spec, Ontology):
        return spec
    if isinstance(spec, dict):
        try:
            return Ontology.model_validate(spec)
        except ValidationError as error:
            raise ConfigurationError(f"invalid ontology: {error}") from error
    if isinstance(spec, (str, Path)):
        return Ontology.from_file(spec)
    raise ConfigurationError(f"ontology must be an Ontology, a dict or a file path, not {type(spec).__name__}")
