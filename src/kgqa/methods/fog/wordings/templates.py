"""Template wordings: whole-question paraphrases per relation chain, for training copies in other people's words.

A template file (JSON; ``metaqa_templates.json`` here) maps a relation chain to question templates with one
``{topic}``: "Give me the cast of other films penned by whoever wrote {topic}". A key is a chain written as its hops,
comma-separated, ``^`` for a hop walked backward (``"^starred_actors,directed_by"``: the directors of the films
an actor starred in, MetaQA's ``actor_to_movie_to_director``).
:meth:`ChainTemplates.compose` picks one template of the question's chain with the caller's seeded ``random.Random``.

Where the phrase table (:mod:`kgqa.methods.fog.wordings`) composes noun phrases, templates carry whole frames:
relative clauses ("whoever wrote"), passives, possessives and imperatives that nesting phrases cannot write.
Three files are packaged (a test checks that none shares a wording with the reworded evaluation sets,
``metaqa-reworded-*``, test, dev and dev2):

- ``metaqa`` (282 templates) was written for kgqa by an author who had not seen the reworded sets nor the phrase table.
- ``metaqa_many`` (2,204) adds to it four authors' styles (``benchmarks/data/fog_many_authors/``; its
  ``merge_templates.py`` rebuilds this file, and a test checks that it does). Their brief was written by someone who
  had read the reworded dev misses, so its closeness to the reworded test split is measured and disclosed in
  docs/fog.md.
- ``metaqa_many2`` (3,110) adds two more authors (``style5.json`` conversational, ``style6.json`` written), briefed
  with the chain descriptions alone; ``merge_templates.py --also`` rebuilds it.

kgqa's addition to FoG's training (``kgqa train fog --template-wordings metaqa``; docs/fog.md).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from kgqa.errors import ConfigError, KGError
from kgqa.kg.base import Chain, parse_chain

SUFFIX = "_templates.json"


def parse_chain_key(key: str) -> Chain:
    """A template file's key as a chain: ``"^starred_actors,directed_by"``."""
    try:
        chain = parse_chain(key)
    except KGError as exc:
        raise ConfigError(f"template key {key!r}: {exc}") from None
    if not chain:  # parse_chain rejects an empty hop, not an empty key
        raise ConfigError(f"template key {key!r}: no relations (write them comma-separated, ^ for backward)")
    return chain


@dataclass(frozen=True)
class ChainTemplates:
    """Question templates per relation chain (see the module docstring)."""

    name: str
    templates: dict[Chain, tuple[str, ...]]

    @classmethod
    def load(cls, spec: str) -> ChainTemplates:
        """A packaged file by name (``metaqa``: ``metaqa_templates.json``; ``metaqa_many``, ``metaqa_many2``) or a
        JSON file by path."""
        from kgqa.methods.fog.wordings import read_wordings_file

        text, name = read_wordings_file(spec, SUFFIX, "template wordings", "file")
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"template wordings {spec!r}: not valid JSON ({exc})") from None
        return cls.from_dict(raw, name=name)

    @classmethod
    def from_dict(cls, raw: object, *, name: str = "templates") -> ChainTemplates:
        if not isinstance(raw, dict) or not raw:
            raise ConfigError(f"template wordings {name!r}: expected an object of chain -> [templates]")
        templates: dict[Chain, tuple[str, ...]] = {}
        for key, options in raw.items():
            if (not isinstance(options, list) or not options
                    or not all(isinstance(o, str) and o.count("{topic}") == 1 for o in options)):
                raise ConfigError(f"template wordings {name!r}: {key!r} must be a non-empty list of templates, each "
                                  f"with exactly one {{topic}}")
            chain = parse_chain_key(key)
            templates[chain] = templates.get(chain, ()) + tuple(options)
        return cls(name=name, templates=templates)

    def covers(self, chain: Chain) -> bool:
        return tuple(chain) in self.templates

    def compose(self, chain: Chain, mention: str, rng: random.Random) -> str | None:
        """A question for ``chain`` about ``mention`` from one of its templates; None when the chain has none."""
        options = self.templates.get(tuple(chain))
        if not options:
            return None
        return rng.choice(options).replace("{topic}", mention)

    def wordings(self) -> list[str]:
        """Every template, in file order (for checks against evaluation sets)."""
        return [t for options in self.templates.values() for t in options]
