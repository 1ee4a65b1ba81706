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

Where kgqa differs from the paper, and why:

* ``walk_back`` (``auto``): CoR's relation search lists the relations leaving the chain's end; on Freebase the step
  back to the siblings of where the chain stands goes by a relation's named reverse. On a KG that names no reverses
  (MetaQA's KB) the chain may instead step back along its last relation (MetaQA's "films by the same director"); on
  Freebase it may not, as the code (:func:`kgqa.steps.walks.walks_back`; ``never`` everywhere is the code's
  behaviour).
* Temperature 0 (the paper uses 0.01, i.e. near-greedy) so runs repeat exactly and the request cache applies.
* The answer-space judgement sees a bounded view of the entities the chain reaches (a count and up to 5 names, nameless
  CVT nodes counted), because the paper's question "are the current target entities of the right type" needs some
  evidence of their type; intermediate entities are still never shown, named or pruned.
* One constraint chain per question, as in the paper's method description; a question with two constraints gets the
  second one only through the main chain or not at all.
* An empty E_final (the constraint chain ran but no candidate satisfied the target) counts as a constraint-chain failure
  and falls back to Global Entity Filtering, rather than answering nothing.
* A chain that reaches no entity at Stop/Constraint counts as a main-chain failure: the next topic entity is tried,
  then direct generation. The topic entity itself is never among the answers unless the chain reaches nothing else.
* Relation pruning can be the LLM (the paper), an embedding scorer or a hybrid: ``pruner`` in the config. Its default
  ``auto`` uses the embedding scorer with an offline local model (a 135M model cannot rank relations) and the LLM
  otherwise. The LLM names its top k (the paper's selection) from a list cut to ``prefilter`` candidates, those most
  similar to the question (embedder, else word overlap with the relation's words); a short choice is filled up to k
  from that ranking, and an unreadable reply is replaced by it, recorded in the trace.
* The prompts carry two to four in-context examples of our own (the paper uses up to five), Freebase-style.
* Reply budgets per step (``prune_tokens``, ``judge_tokens``, ``init_tokens``, ``gef_tokens``, ``answer_tokens``): a
  judgement is a short JSON object, so tiny local models stop early; the paper caps nothing.
* Depth: 3 by default and 4 for CWQ (the paper's setting, given by the dataset's facts as ``max_depth``); the
  iteration budget (``max_iterations``) is ours, so a confused model cannot loop: the paper states no such bound.
* Several topic entities: a main chain starts from one topic entity at a time, in the question's order, the next one
  tried when a topic gives no chain; the other topic entities are offered first among the constraint chain's values, so
  "films by Nolan starring DiCaprio" reaches DiCaprio as the constraint target. The paper does not say how it starts
  from two topics.
* Constraint values: up to ``max_values`` are recalled and ranked by how much the sub-question and the question mention
  them (a year, a title, a name written in the question comes first) before ``max_options`` are shown; the paper shows
  "the values the chain recalls" without a bound, which a prompt cannot hold.
* E_final is the constraint chain run jointly with the main chain as one filter on the KG (``filter_by_constraint``),
  not the intersection of two separately capped sets; truncation is in the trace.
* Global Entity Filtering lists the ``max_gef_candidates`` candidates the question mentions most (the trace says how
  many of how many were shown); nameless mediator (CVT) nodes are never listed or answered.
* A chain that ends on nameless mediator nodes is never a finished chain: a Stop or Constraint judgement there becomes
  Forward (the paper's Freebase prompts leave CVTs to the model).
* "How many" questions are answered with the count of E_final (unless the chain reaches values, such as a population,
  which are then the answer; after Global Entity Filtering only what the LLM kept is counted); the paper's answer step
  is the entity set. Ordering constraints ("the largest", "the first") are left to
  the constraint chain's target or to Global Entity Filtering.
* A KG error (a timeout) or an LLM error during exploration goes to the second fallback layer with its cause in the
  trace, as the paper's fallback for a failed main chain; an error there too fails the question.
* No model call is spent on a chain that reaches no entity, or only the topic entity it started from (a walk back
  through a mediator node, e.g. ``awards_won`` then ``award_winner``).
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
