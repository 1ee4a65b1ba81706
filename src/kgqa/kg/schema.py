"""KG conventions as pluggable schemas: how ids look, which relations are noise, how names are stored, how ids map to IRIs.

A schema never talks to a store. Backends ask it three things: is this identifier well formed (security: nothing else
reaches a SPARQL query), is this relation noise (hidden from methods), and how does an id become an RDF term and back.

Registry: ``get_schema("freebase")``, ``"wikidata"``, ``"generic"`` (default base IRIs) or a ``Schema`` instance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from kgqa.errors import ConfigError, KGError

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
# Characters that may never appear inside an IRI written between angle brackets in SPARQL (SPARQL 1.1, IRIREF).
_IRI_FORBIDDEN = re.compile(r'[\x00-\x20<>"{}|^`\\]')


def check_iri(iri: str) -> str:
    """Return ``iri`` if it can be written as ``<iri>`` in SPARQL without escaping anything; else raise."""
    if not iri or _IRI_FORBIDDEN.search(iri) or ":" not in iri:
        raise KGError(f"{iri!r} is not a valid IRI (empty, no scheme, or contains a character forbidden in an IRI)")
    return iri


@dataclass
class Schema:
    """Generic conventions: ids under one base IRI (percent-encoded), names by ``rdfs:label``, nothing is noise.

    An IRI outside the base namespace keeps its full form as its id, so any RDF file can be loaded.
    """

    name: str = "generic"
    entity_base: str = "http://kgqa.local/entity/"
    relation_base: str = "http://kgqa.local/relation/"
    name_predicates: tuple[str, ...] = (RDFS_LABEL,)
    #: Preferred language of names; a name without a language tag is accepted too.
    language: str = "en"
    noise_prefixes: tuple[str, ...] = ()
    noise_substrings: tuple[str, ...] = ()
    noise_exact: frozenset[str] = field(default_factory=frozenset)
    #: Ids matching this grammar are safe to compile without an IRI check; anything else must be a valid IRI.
    entity_pattern: re.Pattern[str] = field(default_factory=lambda: re.compile(r"^[^\x00-\x1f]+$"))
    relation_pattern: re.Pattern[str] = field(default_factory=lambda: re.compile(r"^[^\x00-\x20]+$"))

    # -- vocabulary ----------------------------------------------------------------------------------------------

    def is_noise_relation(self, relation: str) -> bool:
        """Relations that carry bookkeeping rather than facts (Freebase's type.object.*, *sameAs*, ...)."""
        return (relation in self.noise_exact or relation.startswith(self.noise_prefixes)
                or any(s in relation for s in self.noise_substrings))

    def is_valid_relation(self, relation: str) -> bool:
        return bool(self.relation_pattern.match(relation))

    def is_valid_entity(self, entity: str) -> bool:
        return bool(self.entity_pattern.match(entity))

    def is_cvt(self, entity: str, name: str | None) -> bool:
        """A mediator node: an entity with no name (Freebase CVTs, Wikidata statement nodes)."""
        return name is None and not entity.startswith('"')

    # -- RDF mapping (used by the SPARQL backend and by RDF loaders) ---------------------------------------------

    def entity_iri(self, entity: str) -> str:
        if "://" in entity or entity.startswith("urn:"):
            return check_iri(entity)
        return check_iri(self.entity_base + quote(entity, safe=""))

    def relation_iri(self, relation: str) -> str:
        if "://" in relation or relation.startswith("urn:"):
            return check_iri(relation)
        return check_iri(self.relation_base + quote(relation, safe=""))

    def entity_id(self, iri: str) -> str:
        if iri.startswith(self.entity_base):
            return unquote(iri[len(self.entity_base):])
        return iri

    def relation_id(self, iri: str) -> str:
        if iri.startswith(self.relation_base):
            return unquote(iri[len(self.relation_base):])
        return iri


FREEBASE_NS = "http://rdf.freebase.com/ns/"


@dataclass
class FreebaseSchema(Schema):
    """Freebase: ``ns:`` prefix, ``m.``/``g.`` ids, ``type.object.name``, nameless CVT mediators, bookkeeping noise."""

    name: str = "freebase"
    entity_base: str = FREEBASE_NS
    relation_base: str = FREEBASE_NS
    name_predicates: tuple[str, ...] = (FREEBASE_NS + "type.object.name",)
    noise_prefixes: tuple[str, ...] = ("type.object.", "common.", "freebase.", "type.type.", "kg.object_profile")
    noise_substrings: tuple[str, ...] = ("sameAs", "sameas")
    entity_pattern: re.Pattern[str] = field(default_factory=lambda: re.compile(r"^[mg]\.[0-9a-z_]+$"))
    relation_pattern: re.Pattern[str] = field(
        default_factory=lambda: re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$"))

    def entity_iri(self, entity: str) -> str:
        if self.is_valid_entity(entity):
            return self.entity_base + entity
        return super().entity_iri(entity)

    def relation_iri(self, relation: str) -> str:
        if self.is_valid_relation(relation):
            return self.relation_base + relation
        return super().relation_iri(relation)


WIKIDATA_ENTITY = "http://www.wikidata.org/entity/"
WIKIDATA_PREFIXES = {
    "wdt": "http://www.wikidata.org/prop/direct/",
    "p": "http://www.wikidata.org/prop/",
    "ps": "http://www.wikidata.org/prop/statement/",
    "pq": "http://www.wikidata.org/prop/qualifier/",
}
_WD_REL_RE = re.compile(r"^(wdt|p|ps|pq):P[1-9][0-9]*$")
_WD_ENT_RE = re.compile(r"^(Q[1-9][0-9]*|wds:[A-Za-z0-9$\-]+)$")


@dataclass
class WikidataSchema(Schema):
    """Wikidata: Q/P ids, ``rdfs:label`` by language, ``wdt:`` truthy edges and ``p:``/``ps:``/``pq:`` qualifier paths
    through statement nodes (``wds:...``), which play the part of CVT nodes."""

    name: str = "wikidata"
    entity_base: str = WIKIDATA_ENTITY
    relation_base: str = "http://www.wikidata.org/prop/direct/"
    name_predicates: tuple[str, ...] = (RDFS_LABEL,)
    entity_pattern: re.Pattern[str] = field(default_factory=lambda: _WD_ENT_RE)
    relation_pattern: re.Pattern[str] = field(default_factory=lambda: _WD_REL_RE)

    def is_noise_relation(self, relation: str) -> bool:
        # Only the four property namespaces carry facts; labels, descriptions, sitelinks and wikibase:* do not.
        return not self.is_valid_relation(relation)

    def entity_iri(self, entity: str) -> str:
        if entity.startswith("wds:") and self.is_valid_entity(entity):
            return WIKIDATA_ENTITY + "statement/" + entity[4:]
        if self.is_valid_entity(entity):
            return WIKIDATA_ENTITY + entity
        return super().entity_iri(entity)

    def relation_iri(self, relation: str) -> str:
        if self.is_valid_relation(relation):
            prefix, local = relation.split(":", 1)
            return WIKIDATA_PREFIXES[prefix] + local
        return super().relation_iri(relation)

    def entity_id(self, iri: str) -> str:
        if iri.startswith(WIKIDATA_ENTITY + "statement/"):
            return "wds:" + iri[len(WIKIDATA_ENTITY + "statement/"):]
        if iri.startswith(WIKIDATA_ENTITY):
            return iri[len(WIKIDATA_ENTITY):]
        return iri

    def relation_id(self, iri: str) -> str:
        # Longest namespace first: prop/direct/ and prop/statement/ both start with prop/.
        for prefix, base in sorted(WIKIDATA_PREFIXES.items(), key=lambda kv: -len(kv[1])):
            if iri.startswith(base) and re.fullmatch(r"P[1-9][0-9]*", iri[len(base):]):
                return f"{prefix}:{iri[len(base):]}"
        return iri


_SCHEMAS: dict[str, type[Schema]] = {"generic": Schema, "freebase": FreebaseSchema, "wikidata": WikidataSchema}


def get_schema(spec: str | Schema | None) -> Schema:
    """A schema by name (``generic``, ``freebase``, ``wikidata``) or the instance itself; ``None`` is generic."""
    if isinstance(spec, Schema):
        return spec
    key = (spec or "generic").strip().lower()
    if key not in _SCHEMAS:
        raise ConfigError(f"unknown KG schema {spec!r}; choose one of {', '.join(sorted(_SCHEMAS))}")
    return _SCHEMAS[key]()


def register_schema(name: str, cls: type[Schema]) -> None:
    """Make a custom schema nameable by string everywhere a schema is asked for."""
    _SCHEMAS[name.lower()] = cls


def schema_names() -> list[str]:
    return sorted(_SCHEMAS)
