"""The foresight network (FoG, Sec. 3.1-3.2): a question-guided triple encoder, the triple scorer and the far-to-near
feedback propagation, in torch over a frozen text encoder's vectors.

* **Triple encoder.** A triple is three tokens: the head, relation and tail label vectors (projected from the frozen
  encoder's dimension to ``hidden``) plus learnable role biases. kgqa adds two biases to the relation token: the BFS
  layer the triple sits at and whether the walk crosses it head-to-tail or tail-to-head (MetaQA's chains use one
  relation at two depths in opposite directions, ``^starred_actors`` then ``starred_actors``, which a position-free
  scorer cannot tell apart before propagation). ``self_blocks`` (L_t) self-attention blocks mix the three tokens; one
  cross-attention block then lets the tokens read each (sub-)question's contextual word vectors (the frozen
  encoder's token outputs); the mean token is z_{t,q}.
* **Scorer.** Attention pooling over the sub-questions gives z_t; the context [z_t; h_s; h_o] (node hidden states, zero
  before propagation) goes through an MLP to s_t in [0, 1].
* **Feedback propagation.** On an oriented subgraph (every edge from a far node to a near one), ``propagation_layers``
  (L_m) sweeps; each sweep updates nodes in decreasing distance: m = h_far + MLP([h_far; z_t]), attention over a near
  node's incoming messages, h_near += phi(sum alpha m). Every edge is then re-scored. ``undirected`` is the ablation of
  the paper's Table 3: every node aggregates messages from all its edges at once, with no order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class NetSpec:
    """The network's shape. ``input_dim`` is the frozen encoder's dimension (384 for all-MiniLM-L6-v2)."""

    input_dim: int = 384
    hidden: int = 128
    heads: int = 4
    self_blocks: int = 2
    propagation_layers: int = 2
    max_layers: int = 4
    dropout: float = 0.1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NetSpec:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def segment_softmax(scores: torch.Tensor, segments: torch.Tensor, count: int) -> torch.Tensor:
    """Softmax of ``scores`` within each segment (``segments[i]`` is the segment of ``scores[i]``)."""
    peak = torch.full((count,), float("-inf"), dtype=scores.dtype).scatter_reduce(
        0, segments, scores, reduce="amax", include_self=True)
    weights = torch.exp(scores - peak[segments])
    total = torch.zeros(count, dtype=scores.dtype).index_add_(0, segments, weights)
    return weights / total[segments].clamp_min(1e-12)


#: the parameters the propagation phase trains (the scoring head re-scores after propagation, so it trains too); the
#: rest is the triple encoder, fixed once the scorer phase ends
PROPAGATION_PHASE_PARAMETERS = ("message", "attend", "phi", "head")


class ForesightNet(nn.Module):
    """Triple encoder + scorer + feedback propagation (see the module docstring)."""

    def __init__(self, spec: NetSpec) -> None:
        super().__init__()
        self.spec = spec
        d = spec.hidden
        self.project = nn.Linear(spec.input_dim, d)
        self.question_project = nn.Linear(spec.input_dim, d)
        self.roles = nn.Parameter(torch.zeros(3, d))
        self.layer_bias = nn.Embedding(spec.max_layers + 2, d)
        self.direction_bias = nn.Embedding(2, d)
        self.self_blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d, spec.heads, 2 * d, spec.dropout, batch_first=True, norm_first=True)
            for _ in range(spec.self_blocks))
        # Cross-attention with a learned null key/value (add_bias_kv), so a triple token whose words are not in the
        # question can attend to nothing; the feed-forward also reads token * attended question, the match itself.
        self.cross_norm = nn.LayerNorm(d)
        self.cross_attn = nn.MultiheadAttention(d, spec.heads, dropout=spec.dropout, batch_first=True, add_bias_kv=True)
        self.cross_ff = nn.Sequential(nn.LayerNorm(2 * d), nn.Linear(2 * d, 2 * d), nn.ReLU(), nn.Dropout(spec.dropout),
                                      nn.Linear(2 * d, d))
        self.match = nn.Linear(5, d)
        self.pool = nn.Sequential(nn.Linear(2 * d, d), nn.Tanh(), nn.Linear(d, 1))
        self.head = nn.Sequential(nn.Linear(3 * d, d), nn.ReLU(), nn.Dropout(spec.dropout), nn.Linear(d, 1))
        self.message = nn.ModuleList(
            nn.Sequential(nn.Linear(2 * d, d), nn.ReLU(), nn.Dropout(spec.dropout), nn.Linear(d, d))
            for _ in range(spec.propagation_layers))
        self.attend = nn.ModuleList(nn.Linear(2 * d, 1) for _ in range(spec.propagation_layers))
        self.phi = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.Tanh()) for _ in range(spec.propagation_layers))
        with torch.no_grad():
            # The scorer reads the node states through these columns. They are zero until propagation is trained, so
            # a scorer trained with zero states (as at expansion) scores the same before and after an untrained
            # propagation, and propagation learns a correction from there.
            self.head[0].weight[:, d:].zero_()

    # -- the triple encoder and the scorer -----------------------------------------------------------------------

    def encode(self, head: torch.Tensor, relation: torch.Tensor, tail: torch.Tensor, layer: torch.Tensor,
               backward: torch.Tensor, questions: torch.Tensor, question_mask: torch.Tensor,
               question_of: torch.Tensor | None = None) -> torch.Tensor:
        """z_t for B triples: label vectors (B, input_dim) each, ``layer`` and ``backward`` (B,) ints; ``questions``
        (Q, S, T, input_dim) the token vectors of each question's S sub-questions, ``question_mask`` (Q, S, T) True at
        padding; ``question_of`` (B,) the question of each triple (default: every triple reads question 0).
        Returns (B, hidden)."""
        batch = head.shape[0]
        tokens = torch.stack([self.project(head), self.project(relation), self.project(tail)], dim=1) + self.roles
        position = self.layer_bias(layer.clamp(0, self.spec.max_layers + 1)) + self.direction_bias(backward)
        tokens = tokens + torch.stack([torch.zeros_like(position), position, torch.zeros_like(position)], dim=1)
        for block in self.self_blocks:
            tokens = block(tokens)
        if question_of is None:
            q_tokens = self.question_project(questions[0]).unsqueeze(0).expand(batch, -1, -1, -1)  # (B, S, T, d)
            q_mask = question_mask[0].unsqueeze(0).expand(batch, -1, -1)
        else:
            q_tokens = self.question_project(questions[question_of])  # only the rows this batch reads
            q_mask = question_mask[question_of]
        s, t = q_tokens.shape[1], q_tokens.shape[2]
        # one cross-attention per sub-question: the triple's tokens read that sub-question's words
        per_q = self._cross(tokens.repeat_interleave(s, dim=0), q_tokens.reshape(batch * s, t, -1),
                            q_mask.reshape(batch * s, t))
        z = per_q.mean(dim=1).reshape(batch, s, -1) + self.match(self._match_features(head, relation, tail, questions,
                                                                                     question_mask, question_of, batch))
        if s == 1:
            return z[:, 0]
        keep = (~q_mask).unsqueeze(-1).to(q_tokens.dtype)
        pooled_q = (q_tokens * keep).sum(dim=2) / keep.sum(dim=2).clamp_min(1.0)  # (B, S, d)
        weights = torch.softmax(self.pool(torch.cat([z, pooled_q], dim=-1)).squeeze(-1), dim=1)  # attention pooling
        return (weights.unsqueeze(-1) * z).sum(dim=1)

    @staticmethod
    def _match_features(head: torch.Tensor, relation: torch.Tensor, tail: torch.Tensor, questions: torch.Tensor,
                        question_mask: torch.Tensor, question_of: torch.Tensor | None, batch: int) -> torch.Tensor:
        """(B, S, 5) cosines in the frozen encoder's space: relation and tail against the whole (sub-)question and
        against its best-matching word, and head against the question. A prior the network starts from: with few
        training questions it cannot learn from scratch that "directed" asks for ``directed_by``."""
        unit = torch.nn.functional.normalize(questions, dim=-1)  # (Q, S, T, D)
        keep = (~question_mask).unsqueeze(-1).to(questions.dtype)
        whole = torch.nn.functional.normalize((questions * keep).sum(dim=2), dim=-1)  # (Q, S, D)
        features = []
        for vector in (relation, tail, head):
            v = torch.nn.functional.normalize(vector, dim=-1)
            if question_of is None:  # every triple reads question 0: broadcast, never copy it per triple
                features.append(torch.einsum("bd,sd->bs", v, whole[0]))
                per_word = torch.einsum("bd,std->bst", v, unit[0]).masked_fill(question_mask[0], -1.0)
            else:
                features.append(torch.einsum("bd,bsd->bs", v, whole[question_of]))
                per_word = torch.einsum("bd,bstd->bst", v, unit[question_of]).masked_fill(
                    question_mask[question_of], -1.0)
            if vector is not head:
                features.append(per_word.amax(dim=-1))
        return torch.stack(features, dim=-1)

    def _cross(self, tokens: torch.Tensor, memory: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        query = self.cross_norm(tokens)
        attended, _ = self.cross_attn(query, memory, memory, key_padding_mask=padding, need_weights=False)
        return tokens + attended + self.cross_ff(torch.cat([tokens + attended, query * attended], dim=-1))

    def encoder_fingerprint(self) -> str:
        """A digest of the triple encoder's parameters (everything the propagation phase leaves alone): networks
        whose propagations were trained on one scorer phase share it, and so encode every triple alike."""
        import hashlib

        digest = hashlib.sha256()
        for name, tensor in sorted(self.state_dict().items()):
            if not name.startswith(PROPAGATION_PHASE_PARAMETERS):
                digest.update(name.encode())
                digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()

    def score(self, z: torch.Tensor, h_s: torch.Tensor | None = None, h_o: torch.Tensor | None = None) -> torch.Tensor:
        """s_t logits from [z_t; h_s; h_o] (node states zero when not given)."""
        zeros = torch.zeros_like(z)
        return self.head(torch.cat([z, zeros if h_s is None else h_s, zeros if h_o is None else h_o], dim=-1)).squeeze(-1)

    # -- feedback propagation --------------------------------------------------------------------------------------

    def propagate(self, z: torch.Tensor, near: torch.Tensor, far: torch.Tensor, far_depth: torch.Tensor,
                  nodes: int, *, undirected: bool = False) -> torch.Tensor:
        """Node states after L_m sweeps over oriented edges ``far -> near`` (``far_depth`` the far node's distance)."""
        h = torch.zeros(nodes, z.shape[-1], dtype=z.dtype)
        if z.shape[0] == 0:
            return h
        depths = sorted({int(d) for d in far_depth.tolist()}, reverse=True)
        for layer in range(self.spec.propagation_layers):
            if undirected:
                h = self._aggregate(h, z, torch.cat([near, far]), torch.cat([far, near]), torch.cat([z, z]), layer, nodes)
                continue
            for depth in depths:  # far to near: the nodes at depth d-1 hear from depth d after depth d heard from d+1
                mask = far_depth == depth
                h = self._aggregate(h, z[mask], near[mask], far[mask], z[mask], layer, nodes)
        return h

    def _aggregate(self, h: torch.Tensor, _z: torch.Tensor, receivers: torch.Tensor, senders: torch.Tensor,
                   z_edges: torch.Tensor, layer: int, nodes: int) -> torch.Tensor:
        if receivers.numel() == 0:
            return h
        sender_state = h[senders]
        message = sender_state + self.message[layer](torch.cat([sender_state, z_edges], dim=-1))
        logits = self.attend[layer](torch.cat([h[receivers], message], dim=-1)).squeeze(-1)
        alpha = segment_softmax(logits, receivers, nodes)
        total = torch.zeros_like(h).index_add_(0, receivers, alpha.unsqueeze(-1) * message)
        touched = torch.zeros(nodes, dtype=torch.bool)
        touched[receivers] = True
        update = torch.where(touched.unsqueeze(-1), self.phi[layer](total), torch.zeros_like(h))
        return h + update

    def rescore(self, z: torch.Tensor, head_node: torch.Tensor, tail_node: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """Logits of every edge re-scored with the propagated states of its subject and object."""
        return self.score(z, h[head_node], h[tail_node])
