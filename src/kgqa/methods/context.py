"""The one place that builds a method's context from what it declares it needs (``kgqa ask``, ``kgqa serve`` and
``kgqa eval`` all call :func:`build_context`).

A caller describes what it offers as :class:`Resources`: the KG, the chat model and the embedder, each a spec string or
a ready object (None: the configured ``kg`` / ``llm``), with the options of each. Nothing is loaded until a method needs
it: :func:`build_context` reads the method's :class:`~kgqa.methods.base.Needs` and opens exactly the KG, model,
embedder and artifact store it asks for, each once per :class:`Resources` (thread-safe, so a server's asks share
them). The model is loaded without accounting; each context wraps it in the caller's
:class:`~kgqa.llm.accounting.Recorder`, so calls and tokens are counted per run, per ask or per question.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgqa import config
from kgqa.core import MethodContext, Trace
from kgqa.errors import ConfigError

if TYPE_CHECKING:
    from kgqa.artifacts import ArtifactStore
    from kgqa.kg.base import KnowledgeGraph
    from kgqa.llm.accounting import Recorder
    from kgqa.llm.base import ChatModel
    from kgqa.methods.base import Needs
    from kgqa.text.base import Embedder

__all__ = ["Resources", "build_context", "spec_of"]

#: KG specs that are SPARQL endpoints (the only KGs SPARQL options apply to).
SPARQL_PREFIXES = ("http://", "https://", "endpoint:")


def spec_of(value: Any) -> str | None:
    """A resource as text for a record: the spec as given, or a ready object's name."""
    if value is None or isinstance(value, str):
        return value
    return str(getattr(value, "name", None) or type(value).__name__)


@dataclass
class Resources:
    """What a caller offers its methods, loaded the first time a method needs it and shared afterwards.

    ``kg``/``llm``: a spec or a ready object (None: the configured one); ``embedder``: a spec or an object (None: none
    to offer). ``schema`` and ``kg_options`` go to :func:`kgqa.kg.open_kg` (SPARQL options only for an endpoint),
    ``llm_options`` to :func:`kgqa.llm.load`. ``capture_calls`` logs each call's prompt and reply into the current
    :class:`~kgqa.llm.calls.CallLog` (the service's asks, ``kgqa eval --record-calls``). ``progress`` receives the
    artifact store's build messages.
    """

    kg: str | KnowledgeGraph | None = None
    llm: str | ChatModel | None = None
    embedder: str | Embedder | None = "minilm"
    schema: str | None = None
    kg_options: Mapping[str, Any] = field(default_factory=dict)
    llm_options: Mapping[str, Any] = field(default_factory=dict)
    capture_calls: bool = False
    progress: Callable[[str], None] | None = None
    _loaded: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)

    @property
    def kg_spec(self) -> str:
        """The KG as text: its spec (default: the configured ``kg``) or the given object's name."""
        return str(config.get("kg", spec_of(self.kg)))

    @property
    def llm_spec(self) -> str:
        """The model as text: its spec (default: the configured ``llm``) or the given object's name."""
        return str(config.get("llm", spec_of(self.llm)))

    @property
    def embedder_spec(self) -> str | None:
        return spec_of(self.embedder)

    def open_kg(self) -> KnowledgeGraph:
        """The KG, opened on first use (a given object is used as it is)."""
        return self._once("kg", self._open_kg)

    def model(self) -> ChatModel:
        """The chat model, loaded on first use, without accounting (each context adds its recorder)."""
        return self._once("llm", self._load_model)

    def text_embedder(self) -> Embedder:
        """The embedder, loaded on first use; none offered is a ConfigError."""
        return self._once("embedder", self._load_embedder)

    def artifact_store(self) -> ArtifactStore:
        """The artifact store (trained and built things methods load)."""
        from kgqa.artifacts import ArtifactStore

        return self._once("artifacts", lambda: ArtifactStore(progress=self.progress))

    def loaded(self, name: str) -> Any:
        """What has been loaded under ``name`` (``kg``, ``llm``, ``embedder``, ``artifacts``), or None."""
        return self._loaded.get(name)

    def close(self) -> None:
        """Close the KG if it was opened here from a spec (a KG given as an object belongs to its caller)."""
        kg = self._loaded.pop("kg", None)
        if kg is not None and kg is not self.kg:
            kg.close()

    def _once(self, name: str, load: Callable[[], Any]) -> Any:
        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = load()
            return self._loaded[name]

    def _open_kg(self) -> KnowledgeGraph:
        if self.kg is not None and not isinstance(self.kg, str):
            return self.kg
        from kgqa.kg import open_kg

        spec = self.kg_spec
        if self.kg_options and not spec.strip().startswith(SPARQL_PREFIXES):
            raise ConfigError(f"SPARQL options ({', '.join(sorted(self.kg_options))}) were given but the KG {spec!r} is "
                              "not a SPARQL endpoint URL")
        return open_kg(spec, schema=self.schema, **dict(self.kg_options))

    def _load_model(self) -> ChatModel:
        if self.llm is not None and not isinstance(self.llm, str):
            model: Any = self.llm
        else:
            from kgqa import llm as llm_layer

            model = llm_layer.load(self.llm_spec, **dict(self.llm_options))
        if self.capture_calls:
            from kgqa.llm.calls import CapturingModel

            model = CapturingModel(model)
        return model

    def _load_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ConfigError("this method needs an embedder and none was given (--embedder SPEC)")
        if not isinstance(self.embedder, str):
            return self.embedder
        from kgqa.text import load_embedder

        return load_embedder(self.embedder)


def build_context(needs: Needs, resources: Resources, *, seed: int = 0, recorder: Recorder | None = None,
                  trace: Trace | None = None) -> MethodContext:
    """The context a method with ``needs`` answers in: exactly the KG, model (recorded by ``recorder``), embedder and
    artifact store it declares, from ``resources``; ``trace`` is the question's trace (default: a new one)."""
    model: Any = None
    if needs.llm:
        model = resources.model()
        if recorder is not None:
            from kgqa.llm.accounting import RecordedModel

            model = RecordedModel(model, recorder)
    return MethodContext(kg=resources.open_kg() if needs.kg else None,  # type: ignore[arg-type]
                         llm=model,
                         embedder=resources.text_embedder() if needs.embedder else None,
                         seed=seed, recorder=recorder, trace=trace if trace is not None else Trace(),
                         artifacts=resources.artifact_store() if needs.artifacts else None)
