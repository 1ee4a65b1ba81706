"""KG conventions as pluggable schemas: how ids look, which relations are noise, how names are stored, how ids map to IRIs.

A schema never talks to a store. Backends ask it three things: is this identifier well formed (security: nothing else
reaches a SPARQL query), is this relation noise (hidden from methods), and how does an id become an RDF term and back.

Registry: ``get_schema("freebase")``, ``"wikidata"``, ``"generic"`` (default base IRIs) or a ``Schema`` instance; more
schemas by :func:`register_schema` or the entry-point group ``kgqa.schemas`` (an entry is a ``Schema`` subclass or a
callable returning a ``Schema``).

Each schema's id grammar is written once, here: :data:`FREEBASE_ID_RE` is the Freebase mid pattern every other module
uses (loaders, answer scoring, dataset readers). :func:`relation_words` is the one relation verbaliser.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from kgqa.errors import ConfigError, KGError
from kgqa.registry import Registry

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
    #: Relations whose object is a type (class) node: entity linking never links such a node (rdf:type always counts).
    type_relations: tuple[str, ...] = ()
    #: Whether the vocabulary names the reverse of (most of) its relations, as Freebase's reverse properties do
    #: (``film.director.film`` for ``film.film.directed_by``): a walk then reaches a node's siblings by the reverse,
    #: and the step straight back along the edge it came by is redundant (:func:`kgqa.steps.walks.walks_back`).
    names_reverses: bool = False
    #: Ids matching this grammar are safe to compile without an IRI check; anything else must be a valid IRI.
    entity_pattern: re.Pattern[str] = field(default_factory=lambda: re.compile(r"^[^\x00-\x1f]+\Z"))
    relation_pattern: re.Pattern[str] = field(default_factory=lambda: re.compile(r"^[^\x00-\x20]+\Z"))

    # -- vocabulary ----------------------------------------------------------------------------------------------

    def is_noise_relation(self, relation: str) -> bool:
        """Relations that carry bookkeeping rather than facts (Freebase's type.object.*, *sameAs*, ...)."""
        return (relation in self.noise_exact or relation.startswith(self.noise_prefixes)
                or any(s in relation for s in self.noise_substrings))

    # The grammars end in \Z, not $: "$" also matches before a final newline, which would let "Q42\n" through as an id
    # that needs no IRI check. fullmatch holds a schema of someone else's that ends a pattern with "$" to the same rule.
    def is_valid_relation(self, relation: str) -> bool:
        return self.relation_pattern.fullmatch(relation) is not None

    def is_valid_entity(self, entity: str) -> bool:
        return self.entity_pattern.fullmatch(entity) is not None

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
#: The Freebase entity id grammar (``m.0abc``, ``g.11b6...``): the one definition of a Freebase mid in kgqa.
FREEBASE_ID_RE: re.Pattern[str] = re.compile(r"^[mg]\.[0-9a-z_]+\Z")


def is_freebase_id(value: str) -> bool:
    """Whether ``value`` is a Freebase mid (``m.0abc`` / ``g.11b6...``), by :data:`FREEBASE_ID_RE`."""
    return FREEBASE_ID_RE.match(value) is not None


@dataclass
class FreebaseSchema(Schema):
    """Freebase: ``ns:`` prefix, ``m.``/``g.`` ids, ``type.object.name``, nameless CVT mediators, bookkeeping noise."""

    name: str = "freebase"
    entity_base: str = FREEBASE_NS
    relation_base: str = FREEBASE_NS
    name_predicates: tuple[str, ...] = (FREEBASE_NS + "type.object.name",)
    noise_prefixes: tuple[str, ...] = ("type.object.", "common.", "freebase.", "type.type.", "kg.object_profile")
    noise_substrings: tuple[str, ...] = ("sameAs", "sameas")
    type_relations: tuple[str, ...] = ("type.object.type", "common.topic.notable_types")
    names_reverses: bool = True
    entity_pattern: re.Pattern[str] = field(default_factory=lambda: FREEBASE_ID_RE)
    relation_pattern: re.Pattern[str] = field(
        default_factory=lambda: re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+\Z"))

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
#: A bare Wikidata item, property or lexeme id (Q42, P31, L7): the one grammar kgqa uses for them (datasets, metrics).
WIKIDATA_ID_RE: re.Pattern[str] = re.compile(r"^[QPL][1-9][0-9]*\Z")
_WD_REL_RE = re.compile(r"^(wdt|p|ps|pq):P[1-9][0-9]*\Z")
_WD_ENT_RE = re.compile(r"^(Q[1-9][0-9]*|wds:[A-Za-z0-9$\-]+)\Z")


@dataclass
class WikidataSchema(Schema):
    """Wikidata: Q/P ids, ``rdfs:label`` by language, ``wdt:`` truthy edges and ``p:``/``ps:``/``pq:`` qualifier paths
    through statement nodes (``wds:...``), which play the part of CVT nodes."""

    name: str = "wikidata"
    entity_base: str = WIKIDATA_ENTITY
    relation_base: str = "http://www.wikidata.org/prop/direct/"
    name_predicates: tuple[str, ...] = (RDFS_LABEL,)
    type_relations: tuple[str, ...] = ("wdt:P31", "wdt:P279")
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


#: Every schema by name; an entry is a ``Schema`` subclass or any callable that returns a ``Schema``.
SCHEMAS: Registry[Callable[[], Schema]] = Registry("schema", noun="KG schema")
SCHEMAS.add("generic", Schema)
SCHEMAS.add("freebase", FreebaseSchema)
SCHEMAS.add("wikidata", WikidataSchema)


def get_schema(spec: str | Schema | None) -> Schema:
    """A schema by name (``generic``, ``freebase``, ``wikidata``, or a registered one) or the instance itself; ``None``
    is generic. An unknown name is a ConfigError listing the known ones."""
    if isinstance(spec, Schema):
        return spec
    name = (spec or "generic").strip() or "generic"
    schema = SCHEMAS.get(name)()
    if not isinstance(schema, Schema):
        raise ConfigError(f"KG schema {name!r} is registered as {SCHEMAS.get(name)!r}, which made a "
                          f"{type(schema).__name__}, not a Schema")
    return schema


def register_schema(name: str, cls: Callable[[], Schema]) -> None:
    """Make a custom schema nameable by string everywhere a schema is asked for (a later registration replaces it)."""
    SCHEMAS.add(name, cls, replace=True)


def schema_names() -> list[str]:
    """The registered schema names, sorted."""
    return SCHEMAS.names()


# ---------------------------------------------------------------------------------------------------------------------
# Relations as words


_RELATION_SPLIT_RE = re.compile(r"[._/:#]+|(?<=[a-z])(?=[A-Z])")


def relation_words(relation: str, *, last: int | None = None) -> str:
    """Plain lower-case words for a relation id: the one relation verbaliser of kgqa (prompts, embedding scorers,
    BM25, artifacts).

    Namespace separators (``. _ / : #``) and camelCase boundaries become spaces. With ``last``, only the local name
    (after an IRI's namespace or a ``prefix:``) is kept, and of a dotted name only its last ``last`` segments, which
    drops Freebase's domain (``people.person.place_of_birth`` -> ``person place of birth``):

    >>> relation_words("film.film.directed_by")
    'film film directed by'
    >>> relation_words("wdt:P57"), relation_words("birthPlace")
    ('wdt p57', 'birth place')
    >>> relation_words("http://rdf.freebase.com/ns/people.person.place_of_birth", last=2)
    'person place of birth'
    """
    text = relation
    if last is not None:
        text = re.split(r"[/#]", text)[-1].rsplit(":", 1)[-1]
        segments = [s for s in text.split(".") if s]
        text = ".".join(segments[-last:]) if last > 0 else text
    words = " ".join(w for w in _RELATION_SPLIT_RE.split(text) if w).replace("_", " ").lower()
    return words or relation
