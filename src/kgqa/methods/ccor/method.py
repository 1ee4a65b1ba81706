# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""CCoR (Compositional Chain-of-Relations) and its ablation CoR, after Liu, Zhou and Wang (arXiv 2608.22762).

Main chain (Sec. IV-B): relation-centric exploration from the topic entities; each popped chain is judged by two
hierarchical questions (is it correct and complete? have its entities reached the answer space?) into Forward, Backtrack,
Stop or Constraint. Stop and Constraint execute the chain on the KG, giving E_cand.

Constraint chain (Sec. IV-C): the LLM restates the unresolved constraint as a sub-question and picks its source among the
main chain's positions (the topic, an intermediate variable, or the candidates); the same engine explores from there with
Forward, Backtrack, Stop; on Stop the LLM picks a constraint target among the values the chain recalls and both chains
run jointly on the KG, giving E_con; E_final = E_cand intersected with E_con.

Fallback (Sec. IV-D): Global Entity Filtering by the LLM when the constraint chain fails (grounding ``synthesis``);
CoT direct generation when the main chain fails (grounding ``parametric``). Stage and cause are in the trace.

CoR (``cor``) is the ablation without the constraint chain: a Constraint action goes straight to Global Entity Filtering.

CoR's fidelity is this table without the constraint-chain rows.

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| relation search | the relations leaving the chain's end, intermediate entities as variables | same; on a KG that names no reverses (MetaQA) the chain may step back along its last relation (`walk_back=auto`; `never` is the code's) | yes: MetaQA's KB names no reverses, so "films by the same director" needs the step back |
| relation pruning | the LLM scores the candidates on three criteria and keeps the top k = 3 | the LLM names its top 3, best first, from a list cut to the `prefilter` (30) most similar to the question; a short choice is filled from that ranking; `pruner=auto`: the embedding scorer with an offline local model | yes: prompt budget; a 135M model cannot rank relations |
| memory stack | kept chains pushed in ascending score, the best popped first; backtracking pops the next | same | no |
| main judgement | two hierarchical questions give Forward, Backtrack, Stop or Constraint | same, the reason written before the verdict; the judge sees a count and up to 5 names of what the chain reaches | yes: "the right type" needs some evidence of the type; intermediate entities are still never pruned |
| nameless ends | not discussed | a chain ending on CVT nodes is never finished; no call on a chain that reaches nothing or only its start | yes: a CVT is no answer; spares calls |
| depth | 3, and 4 on CWQ | same, from the dataset's facts (`max_depth`); at most `max_iterations` (12) judgements | yes: the iteration bound is ours, so a confused model cannot loop |
| several topic entities | not said | one main chain per topic entity in the question's order; the other topics offered first as constraint values | yes: the paper is silent |
| constraint initialisation | a standalone sub-question and its source position | same | no |
| constraint chain | the same engine, Forward, Backtrack or Stop; a target picked among the recalled values | same; one per question; up to `max_values` recalled, ranked by mention, `max_options` (30) shown | yes: a prompt cannot hold every value |
| E_final | E_cand intersected with E_con | the constraint chain run jointly with the main chain as one KG filter; an empty E_final falls back to GEF | yes: two separately capped sets could miss each other |
| Global Entity Filtering | the LLM filters E_cand by the constraint (grounding synthesis) | same; the `max_gef_candidates` (50) most mentioned listed | yes: prompt budget |
| direct generation | chain of thought from the question alone (grounding parametric) | same; also after a KG or LLM error during exploration | no |
| counting | the answer is the entity set | "how many" answered with the count of E_final | yes: the gold of such questions is a number |
| temperature | 0.01 | 0 | yes: runs repeat and the request cache applies |
| in-context examples | at most five per prompt | 3-4 per prompt, written for kgqa, Freebase- and MetaQA-style | no |
| CoR | the ablation without the constraint chain | `cor`: a Constraint action goes straight to Global Entity Filtering | no |

Reply budgets per step (``prune_tokens``, ``judge_tokens``, ``init_tokens``, ``gef_tokens``, ``answer_tokens``) keep a
tiny local model's judgements short; the paper caps nothing. A question with two constraints gets the second only
through the main chain. Ordering constraints ("the largest", "the first") are left to the constraint chain's target or
to Global Entity Filtering.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from kgqa.llm.prompts import PromptBook
from kgqa.methods.base import MethodConfig
from kgqa.methods.chain_body import ChainMethod, CoRConfig, chain_signatures
from kgqa.methods.registry import register_method

PROMPTS = PromptBook.for_package("kgqa.methods.ccor")


class CCoRConfig(CoRConfig):
    """CCoR's settings: CoR's, the constraint chain on by default."""

    constraint_chain: bool = Field(default=True, description="False: CoR (constraints by Global Entity Filtering)")


@register_method("ccor")
class CCoR(ChainMethod):
    """CCoR with its constraint chain (see the module docstring); the body is :class:`kgqa.methods.chain_body.ChainMethod`."""

    name = "ccor"
    summary = "Compositional Chain-of-Relations: relation-centric main chain + constraint chain executed on the KG"
    Config: ClassVar[type[MethodConfig]] = CCoRConfig
    prompts: ClassVar[PromptBook] = PROMPTS
    signatures = chain_signatures(PROMPTS, "ccor").all()

    def __init__(self, config: MethodConfig | None = None, /, **settings: Any) -> None:
        super().__init__(config, **settings)
        self.name = "ccor" if self.constraint_chain else "cor"


@register_method("cor")
class CoR(CCoR):
    """CoR: CCoR without the constraint chain (constraints through Global Entity Filtering)."""

    name = "cor"
    summary = "Chain-of-Relations: CCoR's ablation without the constraint chain (constraints by LLM filtering)"
    Config = CoRConfig
    signatures = chain_signatures(PROMPTS, "cor").all()
