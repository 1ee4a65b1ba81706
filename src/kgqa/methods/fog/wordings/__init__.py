"""Composed wordings: training questions written from a relation chain, for a scorer that reads relations, not templates.

A phrase table (TOML, one per KG vocabulary; ``metaqa.toml`` here) gives each relation noun phrases for both directions
and a list of question frames. :meth:`ChainWordings.compose` builds a question for a chain from its topic mention outward,
one phrase per hop, each phrase wrapping the one before ("the release years of films directed by the director of Heat"),
and wraps the result in a frame; choices are drawn from the caller's seeded ``random.Random``. A chain with a hop the
table has no phrase for gives ``None``.

kgqa's addition to FoG's training (``kgqa train fog --composed-wordings metaqa``): a scorer trained only on MetaQA's
templates lost 10-30 points on questions worded otherwise (docs/fog.md), and no paraphraser runs offline here.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kgqa.errors import ConfigError
from kgqa.kg.base import Chain, Direction


def read_wordings_file(spec: str, suffix: str, kind: str, noun: str) -> tuple[str, str]:
    """The text and name of a wordings file: one packaged here (``spec`` + ``suffix``, e.g. ``metaqa.toml``) named
    by ``spec``, or a file by path (one ending in ``suffix``'s extension, or any that exists)."""
    extension = "." + suffix.rsplit(".", 1)[-1]  # ".toml" of "metaqa.toml", ".json" of "_templates.json"
    path = Path(spec).expanduser()
    if path.suffix == extension or path.exists():
        if not path.is_file():
            raise ConfigError(f"{kind} {spec!r}: no such file")
        return path.read_text(encoding="utf-8"), path.stem
    packaged = resources.files(__package__).joinpath(f"{spec}{suffix}")
    if not packaged.is_file():
        known = sorted(p.name[:-len(suffix)] for p in resources.files(__package__).iterdir() if p.name.endswith(suffix))
        raise ConfigError(f"{kind} {spec!r}: not a packaged {noun} ({', '.join(known)}) or a "
                          f"{extension[1:].upper()} file")
    return packaged.read_text(encoding="utf-8"), spec


@dataclass(frozen=True)
class ChainWordings:
    """A phrase table: noun phrases per (direction, relation) and question frames (see the module docstring)."""

    name: str
    frames: tuple[str, ...]
    phrases: dict[tuple[str, str], tuple[str, ...]]

    @classmethod
    def load(cls, spec: str) -> ChainWordings:
        """A packaged table by name (``metaqa``) or a TOML file by path."""
        text, name = read_wordings_file(spec, ".toml", "composed wordings", "table")
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"composed wordings {spec!r}: not valid TOML ({exc})") from None
        return cls.from_dict(raw, name=name)

    @classmethod
    def from_dict(cls, raw: dict[str, object], *, name: str = "table") -> ChainWordings:
        frames = raw.get("frames")
        if not isinstance(frames, list) or not frames or not all(isinstance(f, str) and "{np}" in f for f in frames):
            raise ConfigError(f"composed wordings {name!r}: 'frames' must be a non-empty list of strings with {{np}}")
        phrases: dict[tuple[str, str], tuple[str, ...]] = {}
        for direction in ("out", "in"):
            table = raw.get(direction, {})
            if not isinstance(table, dict):
                raise ConfigError(f"composed wordings {name!r}: [{direction}] must be a table of relation = [phrases]")
            for relation, options in table.items():
                if (not isinstance(options, list) or not options
                        or not all(isinstance(o, str) and "{x}" in o for o in options)):
                    raise ConfigError(f"composed wordings {name!r}: {direction}.{relation} must be a non-empty list "
                                      f"of phrases with {{x}}")
                phrases[(direction, relation)] = tuple(options)
        return cls(name=name, frames=tuple(frames), phrases=phrases)

    def covers(self, chain: Chain) -> bool:
        return all((_direction(h.direction), h.relation) in self.phrases for h in chain)

    def compose(self, chain: Chain, mention: str, rng: random.Random) -> str | None:
        """A question asking for the ends of ``chain`` from ``mention``; None when a hop has no phrase."""
        options = self._hop_options(chain)
        if options is None:
            return None
        phrase = mention
        for choices in options:
            phrase = rng.choice(choices).replace("{x}", phrase)
        return _ask(rng.choice(self.frames), phrase)

    def every(self, chain: Chain, mention: str) -> Iterator[str]:
        """Every question :meth:`compose` can write for ``chain`` (to check a table against a test set's wordings)."""
        options = self._hop_options(chain)
        if options is None:
            return
        phrases = [mention]
        for choices in options:
            phrases = [o.replace("{x}", p) for p in phrases for o in choices]
        yield from (_ask(frame, phrase) for phrase in phrases for frame in self.frames)

    def _hop_options(self, chain: Chain) -> list[tuple[str, ...]] | None:
        """The phrases each hop may take, topic first; None when a hop has none."""
        if not chain or not self.covers(chain):
            return None
        options = []
        for depth, hop in enumerate(chain):
            choices = self.phrases[(_direction(hop.direction), hop.relation)]
            if depth:  # a possessive or a clause reads badly around a phrase: "what the director of X has directed's"
                choices = tuple(o for o in choices if _nests(o)) or choices
            options.append(choices)
        return options


def _ask(frame: str, phrase: str) -> str:
    question = frame.replace("{np}", phrase)
    return question[0].upper() + question[1:]


def _nests(phrase: str) -> bool:
    """Whether ``phrase`` reads well around another phrase: not a possessive ("{x}'s director") or a clause."""
    return "{x}'s" not in phrase and not phrase.startswith(("what ", "when ", "how "))


def _direction(direction: Direction) -> str:
    return "in" if direction is Direction.IN else "out"
