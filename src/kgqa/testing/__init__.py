"""A test kit for methods: a small movie KG, a policy-driven scripted LLM, and a context to run a method on them.

A method's test starts at about ten lines::

    from kgqa.testing import context, in_turn, question, shared_movie_kg, truncated

    def test_my_method_answers_after_a_reask() -> None:
        def policy(p):  # the scripted LLM: the prompt kgqa rendered in, a reply out
            if p.step == "mymethod.pick":  # first reply cut by max_tokens, the re-ask answered
                return in_turn(truncated({"relation": "film.director.film"}), {"relation": "film.director.film"})
            return {"answers": ["Inception"]}
        ctx, model, recorder = context(shared_movie_kg(), policy, embedder="hash")
        pred = MyMethod().answer(question("What did Christopher Nolan direct?", ("m.nolan", "Christopher Nolan")), ctx)
        assert sorted(pred.names) == ["Inception", "Interstellar", "Memento"]
        assert recorder.by_step()["mymethod.pick"].calls == 2 and model.prompts("mymethod.pick")[1].attempt == 1

The pieces:

* :func:`movie_kg` / :func:`shared_movie_kg` (:mod:`kgqa.testing.movies`): directors, films, CVT performances,
  typed-literal years, countries and a distractor award branch, as a real embedded store; :func:`small_kg`: a store
  of exactly the triples a test gives.
* :class:`PolicyModel` (:mod:`kgqa.testing.policy`): a chat model whose reply is ``policy(prompt)``, computed from the
  rendered :class:`Prompt` (messages, system and user text, ``step``, schema, re-ask ``attempt``), with
  :func:`unreadable`, :func:`truncated`, :func:`fenced`, :func:`fail`, :func:`in_turn`, :func:`script` and
  :func:`by_step` to script bad replies as easily as good ones.
* :func:`context`: a :class:`~kgqa.core.MethodContext` whose LLM is the policy model behind a
  :class:`~kgqa.llm.RecordedModel`, so calls and approximate tokens are counted per step exactly as in a run;
  :func:`question` builds a :class:`~kgqa.core.Question`; :func:`offline_embedder` is the deterministic embedder for
  tests (``hash``: no model download, same vectors on every machine).

Only the LLM is scripted: the KG is a real store and the replies go through the same parsing, validation and re-ask
(:func:`kgqa.llm.structured.ask_json`) as a real model's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kgqa.core import GoldAnswer, MethodContext, Question, TopicEntity
from kgqa.llm.accounting import RecordedModel, Recorder
from kgqa.testing.movies import XSD_GYEAR, movie_kg, shared_movie_kg, small_kg
from kgqa.testing.policy import (
    InTurn,
    Policy,
    PolicyError,
    PolicyModel,
    Prompt,
    Reply,
    budget_cut,
    by_step,
    fail,
    fenced,
    in_turn,
    script,
    truncated,
    unreadable,
)

if TYPE_CHECKING:
    from kgqa.kg.base import KnowledgeGraph
    from kgqa.text.base import Embedder

__all__ = [
    "OFFLINE_EMBEDDER", "XSD_GYEAR", "InTurn", "Policy", "PolicyError", "PolicyModel", "Prompt", "Reply", "budget_cut",
    "by_step",
    "context", "fail", "fenced", "in_turn", "movie_kg", "offline_embedder", "question", "script", "shared_movie_kg",
    "small_kg", "truncated", "unreadable",
]

#: The embedder spec tests use: character n-grams hashed into 256 buckets; offline, deterministic, no model to fetch.
OFFLINE_EMBEDDER = "hash"


def offline_embedder(dim: int = 256) -> Embedder:
    """The deterministic offline embedder for tests (:class:`kgqa.text.embedders.HashingEmbedder`)."""
    from kgqa.text.embedders import load_embedder

    return load_embedder(f"{OFFLINE_EMBEDDER}:{dim}")  # type: ignore[no-any-return]


def _no_llm(prompt: Prompt) -> Reply:
    raise PolicyError(f"this test gave no policy, but the method called the LLM (step {prompt.step!r})")


def context(kg: KnowledgeGraph | None, policy: Policy | Reply | PolicyModel | None, embedder: Embedder | str | None = None,
            *, seed: int = 0, artifacts: Any = None) -> tuple[MethodContext, PolicyModel, Recorder]:
    """A method context over ``kg`` whose LLM is ``policy``, with a fresh recorder: ``(ctx, model, recorder)``.

    ``policy`` is a policy function, a constant reply, or a ready :class:`PolicyModel`; ``None`` gives a context with
    no LLM (a graph-only method), and ``model`` then fails any call. ``embedder`` is an embedder or a spec for
    :func:`kgqa.text.embedders.load_embedder` (``"hash"``: see :func:`offline_embedder`). ``ctx.llm`` records every
    call in ``recorder`` (``recorder.by_step()``, ``recorder.totals()``); ``model.history`` holds the prompts.
    """
    model = policy if isinstance(policy, PolicyModel) else PolicyModel(_no_llm if policy is None else policy)
    recorder = Recorder()
    if isinstance(embedder, str):
        from kgqa.text.embedders import load_embedder

        embedder = load_embedder(embedder)
    llm = None if policy is None else RecordedModel(model, recorder)
    ctx = MethodContext(kg=kg, llm=llm, embedder=embedder, seed=seed, recorder=recorder,  # type: ignore[arg-type]
                        artifacts=artifacts)
    return ctx, model, recorder


def question(text: str, *topics: tuple[str, str] | TopicEntity, answers: Iterable[str | tuple[str, str]] = (),
             qid: str = "q", **metadata: Any) -> Question:
    """A :class:`Question`: topics as ``(id, name)`` pairs, gold answers as names or ``(id, name)`` pairs."""
    return Question(
        id=qid, text=text,
        topic_entities=[t if isinstance(t, TopicEntity) else TopicEntity(id=t[0], name=t[1]) for t in topics],
        answers=[GoldAnswer(name=a) if isinstance(a, str) else GoldAnswer(id=a[0], name=a[1]) for a in answers],
        metadata=metadata)
