"""Exact attention capture: every head's queries, keys, values, attention scores and weights of one forward pass.

:class:`Capture` is the one capture type of the library, addressed by layer number (``cap[layer]``) as
TransformerLens's ``ActivationCache`` is; every way of capturing returns it (:func:`capture`,
:func:`attnlimits.models.windows.capture_windows`, :func:`attnlimits.models.lens.capture_windows`,
:func:`attnlimits.models.arrays.captures`, :func:`attnlimits.models.kv_capture.capture_long`).

``capture(model, input_ids)`` runs one forward pass through a registered attention function
(``transformers.AttentionInterface``) that records the post-positional-encoding queries and keys, expands keys and
values to the query heads (grouped-query attention), and delegates to the modeling module's own
``eager_attention_forward``, so the recorded weights *are* the model's attention probabilities.
:func:`exactness_report` and :func:`prefix_difference` measure how exact that is.

One concept, one module (over 600 lines): the capture type and the recording attention that fills it,
which must agree on every field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from attnlimits.core.normalizers import NORMALIZERS, check_normalizer
from attnlimits.models.describing import config_facts
from attnlimits.models.hf import import_transformers
from attnlimits.models.loading import LoadedModel

__all__ = [
    "measure_capture",
    "CAPTURE_IMPLEMENTATION",
    "PRECISIONS",
    "TOKENS",
    "Capture",
    "LayerCapture",
    "LayerNotCapturedError",
    "Recorder",
    "Row",
    "attention_implementation",
    "capture",
    "dtype_of",
    "eager_attentions",
    "exactness_report",
    "exactness_table",
    "prefix_difference",
    "query_rows",
    "recompute_float64",
]

#: Name of the attention implementation registered for :func:`capture`.
CAPTURE_IMPLEMENTATION = "attnlimits_capture"


class Row(NamedTuple):
    """One query's attention over the keys it sees: the input :mod:`attnlimits.core.selection` expects.

    ``weights`` ``(n,)`` sum to one; ``values`` ``(n, head_dim)`` are the value vectors of the same keys (the
    tokens x of the book); ``keys`` ``(n,)`` are their positions, increasing (``0..query`` under a causal mask).
    """

    weights: torch.Tensor
    values: torch.Tensor
    keys: torch.Tensor


@dataclass
class LayerCapture:
    """One layer's attention, every tensor shaped ``(batch, heads, seq, ·)`` with ``heads`` = query heads.

    ``layer`` is the layer's number in the model (0 = first); ``cap[layer]`` of a :class:`Capture` is this record
    (its docstring maps the names to TransformerLens's hooks). ``logits`` are attention scores (pre-softmax
    q kᵀ · scaling, masked entries −inf), not vocabulary logits: the capture never runs the language-model head.

    ``q``, ``k``: after positional encoding (RoPE applied; GPT-2 adds positions to the input instead).
    ``k``, ``v``: expanded to the query heads under grouped-query attention (head h uses key/value head
    ``h // (heads / kv_heads)``). ``weights``: the model's own attention probabilities (or, with ``float64=True``,
    their float64 recomputation ``softmax(logits)``). ``masked``: True where the model's mask removes a key.

    ``logits = q kᵀ · scaling``, with masked entries set to −inf, is what the model feeds its softmax. It is
    computed on access from the captured ``q`` and ``k`` by the very expression of the model's eager attention
    (bit-identical: ``softmax(logits)`` reproduces ``weights`` exactly), rather than stored, which halves the
    memory of a capture; with ``float64=True`` it is stored in float64.
    """

    layer: int
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    weights: torch.Tensor
    masked: torch.Tensor
    scaling: float
    kv_heads: int
    stored_logits: torch.Tensor | None = field(default=None, repr=False)

    @property
    def logits(self) -> torch.Tensor:
        """Attention scores ``q kᵀ · scaling`` with masked entries −inf, shape ``(batch, heads, seq, seq)``."""
        if self.stored_logits is not None:
            return self.stored_logits
        logits = torch.matmul(self.q, self.k.transpose(-1, -2)).mul_(self.scaling)  # = eager's matmul(q, kᵀ) * s
        return logits.masked_fill_(self.masked, float("-inf"))

    @property
    def seq_len(self) -> int:
        """Number of positions captured."""
        return self.q.shape[-2]

    def row(self, query: int, *, head: int, batch: int = 0) -> Row:
        """Query ``query``'s weights over the keys its mask lets it see, with their values and positions.

        A captured row ``weights[batch, head, query]`` has an entry for every key position; the keys the mask removes
        (under a causal mask the future ones, ``query + 1`` and later) hold weight exactly 0. Passed as they are to
        :mod:`attnlimits.core.selection`, those zeros count as tokens: each lies ``||s||`` from the context vector and
        inflates d~, and :func:`attnlimits.core.selection.top_n` can pick them. This row keeps only the visible keys:
        under a causal mask it is ``weights[batch, head, query, : query + 1]`` with ``v[batch, head, : query + 1]``;
        under a sliding window, the window.
        """
        shape = self.weights.shape
        for name, value, size in (("batch", batch, shape[0]), ("head", head, shape[1]), ("query", query, shape[2])):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
                raise ValueError(f"{name}: expected an integer in 0..{size - 1}, got {value!r}")
        visible = ~torch.broadcast_to(self.masked, shape)[batch, head, query]
        keys = visible.nonzero().squeeze(-1)
        return Row(self.weights[batch, head, query, keys], self.v[batch, head, keys], keys)

    @property
    def nbytes(self) -> int:
        """Memory held by this capture (shared masks counted once per layer)."""
        tensors = [self.q, self.k, self.v, self.weights, self.masked]
        if self.stored_logits is not None:
            tensors.append(self.stored_logits)
        return sum(t.numel() * t.element_size() for t in tensors)


class LayerNotCapturedError(KeyError, IndexError):
    """A layer number that a :class:`Capture` does not hold (raised by ``cap[layer]``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass
class Capture:
    """What one window's forward pass left behind, addressed by **layer number** as TransformerLens's
    ``ActivationCache`` is addressed by hook name: the one capture type of the library.

    ``cap[layer]`` is that layer's :class:`LayerCapture` (``capture(model, ids, layers=[2, 0])[2]`` is layer 2;
    ``[1]`` raises :class:`LayerNotCapturedError`, a ``KeyError`` and ``IndexError`` naming the captured layers);
    ``cap.layer_ids`` lists the captured layers in increasing order, ``for lc in cap`` yields their captures in that
    order, ``len(cap)`` counts them and ``layer in cap`` asks for one. Each name and its TransformerLens hook (shapes
    here put heads before positions, TransformerLens puts them after)::

        attnlimits                          TransformerLens                      shape here
        cap[l].q  (after RoPE)              blocks.{l}.attn.hook_rot_q           (batch, heads, seq, head_dim)
        cap[l].q  (GPT-2: no RoPE)          blocks.{l}.attn.hook_q               (batch, heads, seq, head_dim)
        cap[l].k  (after RoPE, expanded)    blocks.{l}.attn.hook_rot_k           (batch, heads, seq, head_dim)
        cap[l].v  (expanded)                blocks.{l}.attn.hook_v               (batch, heads, seq, head_dim)
        cap[l].logits, cap.logits(l, L)     blocks.{l}.attn.hook_attn_scores     (batch, heads, seq, seq)
        cap[l].weights, cap.weights(l, L)   blocks.{l}.attn.hook_pattern         (batch, heads, seq, seq)
        cap.residual[l]                     blocks.{l}.hook_resid_pre            (1, seq, d_model)
        cap.embedding                       hook_embed                           (1, seq, d_model)
        cap.stack("weights")                cache.stack_activation("pattern")    (layers, batch, heads, seq, seq)

    The methods :meth:`logits`, :meth:`weights` and :meth:`inputs` read window (batch row) 0 over its first L
    tokens, ``(heads, rows, L)``, recomputing the weights from the captured q and k in the precision asked for:
    :func:`attnlimits.models.windows.capture_windows` therefore drops ``cap[l].weights`` (an empty tensor) to keep
    its memory at q, k and v. :class:`attnlimits.models.arrays.ArrayCapture` (attention given as arrays) and
    :class:`attnlimits.models.kv_capture.LongCapture` (the SDPA capture of long windows) are captures whose logits
    and weights come from what they hold instead.

    ``input_ids``: the token ids ``(batch, seq)`` (None for attention given as arrays); ``float64``: logits and
    weights recomputed in float64; ``seconds``: how long the capture took; ``meta``: the model's shape facts;
    ``index``: the window's position in the text (0 = the first window after the first chapter heading, and 0 for
    :func:`capture` unless told); ``residual``: layer number -> that layer's input residual stream when it was
    asked for; ``embedding``: the input token embeddings; ``bos``: whether the window starts with the tokenizer's
    BOS token (then token 0 is that BOS).
    """

    layers: list[LayerCapture]  # or records shaped like it (ArrayLayer, KVLayer)
    input_ids: torch.Tensor | None = None
    float64: bool = False
    seconds: float = 0.0
    meta: dict = field(default_factory=dict)
    index: int = 0
    residual: dict | None = None
    embedding: torch.Tensor | None = None
    bos: bool = False

    def __post_init__(self) -> None:
        self.layers = sorted(self.layers, key=lambda r: r.layer)
        self._by_layer = {r.layer: r for r in self.layers}

    @property
    def layer_ids(self) -> list[int]:
        """The captured layer numbers, increasing."""
        return [r.layer for r in self.layers]

    @property
    def seq_len(self) -> int:
        """Number of positions captured (the same in every layer)."""
        return self.layers[0].seq_len

    def __getitem__(self, layer: int) -> LayerCapture:
        if isinstance(layer, bool) or not hasattr(type(layer), "__index__"):
            raise TypeError(f"a Capture is indexed by layer number (an int), got {type(layer).__name__}")
        try:
            return self._by_layer[operator.index(layer)]
        except KeyError:
            raise LayerNotCapturedError(
                f"layer {layer} was not captured; this capture holds layers {self.layer_ids}"
            ) from None

    def __contains__(self, layer) -> bool:
        return layer in self._by_layer

    def __iter__(self) -> Iterator[LayerCapture]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def stack(self, name: str) -> torch.Tensor:
        """One field of every captured layer stacked: shape ``(layers, batch, heads, seq, ·)``."""
        if name not in {"q", "k", "v", "logits", "weights"}:
            raise ValueError(f"name must be one of q, k, v, logits, weights; got {name!r}")
        return torch.stack([getattr(layer, name) for layer in self.layers])

    def window(self, layer: int, L: int) -> int | None:
        """The sliding window w of a layer over the first L tokens (row t sees ``t - w < n <= t``), read from the
        mask the model itself applied; None when that mask is the plain causal one (always for L <= w)."""
        visible = ~self[layer].masked[0, 0, :L, :L]
        t = torch.arange(L, device=visible.device).unsqueeze(-1)
        n = torch.arange(L, device=visible.device)
        if torch.equal(visible, n <= t):
            return None
        w = int(visible.sum(-1).max())
        if not torch.equal(visible, (n <= t) & (n > t - w)):
            raise ValueError(
                f"layer: {layer}'s attention mask is neither causal nor a causal sliding window; the experiments "
                "support those two"
            )
        return w

    def heads(self, layer: int) -> int:
        """The number of query heads of layer number ``layer``."""
        return self[layer].q.shape[1]

    @property
    def device(self) -> torch.device:
        """Where the capture's tensors are (the model's device)."""
        return self.layers[0].q.device

    def logits(self, layer: int, L: int, first_row: int = 0, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The model's own float32 logits of the first L tokens, ``(H, R, L)``, masked entries -inf: the query rows
        ``first_row..L-1`` (all of them by default), or only the query positions ``rows`` (a 1-D integer tensor of
        positions below L, in that order)."""
        lc = self[layer]
        rows = query_rows(L, first_row, rows, lc.q.device)
        q, k = lc.q[0, :, rows], lc.k[0, :, :L]
        logits = torch.matmul(q, k.transpose(-1, -2)).mul_(lc.scaling)
        return logits.masked_fill_(lc.masked[0, 0, rows, :L], float("-inf"))

    def weights(
        self,
        layer: int,
        L: int,
        *,
        precision: str = "float64",
        normalizer: str | None = None,
        first_row: int = 0,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The attention weights of the first L tokens, ``(H, R, L)`` (rows as in :meth:`logits`): the softmax of
        the model's logits in ``precision``, or the normaliser named ``normalizer`` applied to the same masked
        logits (masked entries get weight 0)."""
        dtype = dtype_of(precision)
        check_normalizer(normalizer)
        logits = self.logits(layer, L, first_row, rows).to(dtype)
        return torch.softmax(logits, dim=-1) if normalizer is None else NORMALIZERS[normalizer](logits, dim=-1)

    def inputs(
        self,
        layer: int,
        L: int,
        *,
        exclude_sink: bool = False,
        tokens: str = "value",
        precision: str = "float64",
        normalizer: str | None = None,
        first_row: int = 0,
        rows: torch.Tensor | None = None,
    ):
        """(alpha, x) of one layer over the first L tokens: alpha ``(H, L, L)``, x ``(H, L, d)``; with
        ``first_row`` only the query rows ``first_row..L-1`` of alpha, ``(H, L - first_row, L)``, with ``rows`` only
        the query positions it lists (:meth:`logits`).

        ``tokens`` (one of :data:`TOKENS`): x is the head's value vectors (``"value"``), the layer's input residual
        stream (``"residual"``) or the input token embeddings normalised to unit length per token
        (``"embedding"``, the same for every layer: the paper's "extract and normalize token embeddings"); the
        last two are the same for every head and need a capture made with that ``tokens``.

        ``precision="float64"``: alpha is the float64 softmax of the model's logits (rows sum to 1 within 1e-15);
        ``"float32"``: the model's own float32 weights, bit for bit, and float32 tokens. ``normalizer``: None is the
        model's softmax; a name of :data:`attnlimits.core.normalizers.NORMALIZERS` applies that normaliser instead to
        the same masked logits (masked entries get weight 0), in ``precision``. ``exclude_sink``: token 0's weight
        is set to 0 and, for a normaliser whose rows sum to one, the others are renormalised to sum to one (for
        softmax: the softmax over them); a map whose rows need not sum to one (sigmoid, softpick, a sink logit)
        keeps the other weights as they are.
        """
        dtype = dtype_of(precision)
        alpha = self.weights(layer, L, precision=precision, normalizer=normalizer, first_row=first_row, rows=rows)
        if exclude_sink:
            alpha = alpha.clone()
            alpha[..., 0] = 0
            if normalizer is None or NORMALIZERS[normalizer].sums_to_one:  # a distribution over the other tokens
                alpha = alpha / alpha.sum(-1, keepdim=True).clamp_min(torch.finfo(alpha.dtype).tiny)
        if tokens == "value":
            return alpha, self[layer].v[0, :, :L].to(dtype)
        if tokens not in TOKENS:
            raise ValueError(f"tokens: must be one of {TOKENS}, got {tokens!r}")
        held = self.residual if tokens == "residual" else self.embedding
        if held is None:
            made = "capture_windows(..., tokens='residual')" if tokens == "residual" else "capture_windows"
            raise ValueError(f"tokens: {tokens!r} needs a capture made with {made}")
        if tokens == "residual":
            x = held[layer][0, :L].to(dtype)
        else:
            x = torch.nn.functional.normalize(held[0, :L].to(dtype), dim=-1)
        return alpha, x.expand(alpha.shape[0], -1, -1)


def query_rows(L: int, first_row: int, rows: torch.Tensor | None, device) -> slice | torch.Tensor:
    """The query rows :meth:`Capture.logits` reads: ``first_row..L-1``, or the positions ``rows`` (checked: a 1-D
    tensor of positions below L, and no ``first_row``) on ``device``."""
    if rows is None:
        return slice(first_row, L)
    if first_row or rows.ndim != 1 or (len(rows) and not 0 <= int(rows.min()) <= int(rows.max()) < L):
        raise ValueError(f"rows: expected a 1-D tensor of positions below L = {L} (and no first_row)")
    return rows.to(device)


#: What the tokens x of :meth:`Capture.inputs` are: the heads' values, the layer's input residual stream, or the
#: input token embeddings normalised to unit length.
TOKENS = ("value", "residual", "embedding")
PRECISIONS = {"float32": torch.float32, "float64": torch.float64}


def dtype_of(precision: str) -> torch.dtype:
    if precision not in PRECISIONS:
        raise ValueError(f"precision: must be one of {sorted(PRECISIONS)}, got {precision!r}")
    return PRECISIONS[precision]


_registered = False


def _masked_positions(attention_mask, shape, device) -> torch.Tensor:
    """Boolean (…, q, k) tensor: True where the model's mask removes the key from the softmax."""
    if attention_mask is None:
        q_len, k_len = shape[-2], shape[-1]
        return torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(k_len - q_len + 1)
    if attention_mask.dtype == torch.bool:
        return ~attention_mask
    return attention_mask <= torch.finfo(attention_mask.dtype).min / 2


def _recording_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention function registered under :data:`CAPTURE_IMPLEMENTATION`: record, then run the model's eager."""
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if eager is None:
        raise NotImplementedError(
            f"{type(module).__name__} has no eager_attention_forward in {type(module).__module__}: capture supports "
            "models built on transformers' AttentionInterface (GPT-2, Llama, Mistral, Qwen2, ...)"
        )
    output, weights = eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    state = _recorder.state
    layer = getattr(module, "layer_idx", None)
    if state is not None and (state["layers"] is None or layer in state["layers"]):
        if weights is None:
            raise RuntimeError(f"{type(module).__name__}'s eager attention returned no weights")
        scale = query.shape[-1] ** -0.5 if scaling is None else float(scaling)
        n_rep = query.shape[1] // key.shape[1]
        k = key.repeat_interleave(n_rep, dim=1) if n_rep > 1 else key
        v = value.repeat_interleave(n_rep, dim=1) if n_rep > 1 else value
        shape = (*query.shape[:-1], key.shape[-2])
        masked = _masked_positions(attention_mask, shape, query.device).expand(query.shape[0], 1, shape[-2], shape[-1])
        if state["masked"] is not None and torch.equal(state["masked"], masked):
            masked = state["masked"]  # every layer of a plain causal model shares one mask
        state["masked"] = masked
        state["records"].append(
            LayerCapture(
                layer=layer if layer is not None else len(state["records"]),
                q=query.detach(),
                k=k.detach(),
                v=v.detach(),
                weights=weights.detach(),
                masked=masked.detach(),
                scaling=scale,
                kv_heads=key.shape[1],
            )
        )
    return output, weights


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(CAPTURE_IMPLEMENTATION, _recording_attention)
    AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, eager_mask)  # the eager path's additive float mask
    _registered = True


@contextlib.contextmanager
def attention_implementation(model, name: str) -> Iterator[None]:
    """Temporarily switch a transformers model to another attention implementation (restored on exit)."""
    previous = model.config._attn_implementation
    model.set_attn_implementation(name)
    if model.config._attn_implementation != name:
        raise NotImplementedError(
            f"{type(model).__name__} does not support switching its attention implementation, so it cannot be captured"
        )
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


class Recorder:
    """One forward pass whose attention layers record what they see.

    ``implementation`` names an attention function registered with transformers' AttentionInterface that reads
    :attr:`state` (None between passes) and appends its layer's record there. Passes run one at a time (a lock), so
    threads that capture at once do not mix their records.
    """

    def __init__(self, implementation: str):
        self.implementation = implementation
        self.state: dict | None = None
        self._lock = threading.Lock()

    def run(self, hf, ids: torch.Tensor, state: dict) -> float:
        """``hf``'s transformer body (no LM head: no vocabulary logits) over ``ids`` with :attr:`state` = ``state``;
        returns the pass's seconds. The model's attention implementation and train/eval mode are restored."""
        body = getattr(hf, hf.base_model_prefix, hf)
        with self._lock:
            was_training = hf.training
            hf.eval()
            started = time.perf_counter()
            try:
                self.state = state
                with attention_implementation(hf, self.implementation), torch.inference_mode():
                    body(input_ids=ids, use_cache=False)
            finally:
                self.state = None
                hf.train(was_training)
            return time.perf_counter() - started


_recorder = Recorder(CAPTURE_IMPLEMENTATION)


def _as_input_ids(input_ids, vocab_size: int, max_positions: int | None) -> torch.Tensor:
    ids = torch.as_tensor(input_ids)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise ValueError(f"input_ids must hold integer token ids, got dtype {ids.dtype}")
    if ids.ndim == 1:
        ids = ids.unsqueeze(0)
    if ids.ndim != 2 or ids.shape[1] == 0 or ids.shape[0] == 0:
        raise ValueError(f"input_ids must be shaped (seq,) or (batch, seq) with seq ≥ 1, got {tuple(ids.shape)}")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"input_ids must lie in [0, {vocab_size}) (the vocabulary), got [{ids.min()}, {ids.max()}]")
    if max_positions is not None and ids.shape[1] > max_positions:
        raise ValueError(f"sequence length {ids.shape[1]} exceeds the model's {max_positions} positions")
    return ids.long()


def capture(
    model: LoadedModel | torch.nn.Module,
    input_ids,
    *,
    layers: Iterable[int] | None = None,
    float64: bool = False,
    index: int = 0,
) -> Capture:
    """Run ONE forward pass and return every (or the chosen) layer's q, k, v, logits and weights.

    ``input_ids``: ``(seq,)`` or ``(batch, seq)`` integer token ids (no padding). ``layers``: indices of the layers to
    keep (all by default; fewer saves memory: a layer costs ``2 · batch · heads · seq² · 4`` bytes for logits and
    weights). ``float64=True`` recomputes logits and weights in float64 from the captured q and k (and returns q, k,
    v in float64 too). ``index``: the window's position in the text, recorded in the capture. The model's attention
    implementation is switched for this call only.
    """
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"index: must be an integer >= 0 (the window's position in the text), got {index!r}")
    import_transformers()
    hf = model.model if isinstance(model, LoadedModel) else model
    if not isinstance(hf, torch.nn.Module) or not hasattr(hf, "config"):
        raise ValueError(f"model must be a LoadedModel or a transformers model, got {type(model).__name__}")
    info = config_facts(hf.config)
    ids = _as_input_ids(input_ids, info["vocab_size"], info["max_positions"])
    keep = None
    if layers is not None:
        keep = {int(i) for i in layers}
        bad = sorted(i for i in keep if not 0 <= i < info["n_layers"])
        if bad or not keep:
            raise ValueError(f"layers must be a non-empty subset of 0..{info['n_layers'] - 1}, got {sorted(keep)}")
    device = next(hf.parameters()).device
    ids = ids.to(device)
    _register()
    state = {"layers": keep, "records": [], "masked": None}
    seconds = _recorder.run(hf, ids, state)
    records = state["records"]
    if float64:
        records = [recompute_float64(r) for r in records]
    return Capture(layers=records, input_ids=ids, float64=float64, seconds=seconds, meta=info, index=index)


def recompute_float64(r: LayerCapture) -> LayerCapture:
    """The capture ``r`` with q, k, v in float64 and logits and weights recomputed from them in float64."""
    q, k, v = r.q.double(), r.k.double(), r.v.double()
    logits = (torch.matmul(q, k.transpose(-1, -2)) * r.scaling).masked_fill_(r.masked, float("-inf"))
    weights = torch.softmax(logits, dim=-1)
    return dataclasses.replace(r, q=q, k=k, v=v, weights=weights, stored_logits=logits)


def eager_attentions(model: LoadedModel | torch.nn.Module, input_ids) -> tuple[torch.Tensor, ...]:
    """The reference: ``output_attentions=True`` of a plain eager run (one (batch, heads, seq, seq) per layer)."""
    import_transformers()
    hf = model.model if isinstance(model, LoadedModel) else model
    info = config_facts(hf.config)
    ids = _as_input_ids(input_ids, info["vocab_size"], info["max_positions"]).to(next(hf.parameters()).device)
    body = getattr(hf, hf.base_model_prefix, hf)
    with attention_implementation(hf, "eager"), torch.inference_mode():
        return body(input_ids=ids, use_cache=False, output_attentions=True).attentions


def exactness_report(
    model: LoadedModel | torch.nn.Module, input_ids, prefix: int | None = None, longer: Capture | None = None
) -> dict:
    """The checks the experiments rely on, as max absolute differences (the chapter shows them, pytest asserts them).

    - ``weights vs eager output_attentions``: captured weights against an independent eager run;
    - ``softmax(logits) vs weights``: the captured logits are what the model normalises;
    - ``float64 weights vs weights``: how far float32 is from a float64 recomputation;
    - ``masked entries``: the -inf logits are exactly the mask each layer should apply (:func:`layer_mask`: causal,
      and the sliding window on a sliding-window layer);
    - ``prefix rows vs short capture``: rows 0..prefix−1 of this capture against a capture of the first ``prefix``
      tokens (causal models: one pass at length L serves every L' ≤ L);
    - with ``longer`` (a capture of a longer sequence that starts with ``input_ids``): its first rows against this
      capture, by :func:`prefix_difference`.
    """
    ids = torch.as_tensor(input_ids)
    hf_config = (model.model if isinstance(model, LoadedModel) else model).config
    cap = capture(model, ids)
    ref = eager_attentions(model, ids)
    eager_diff = softmax_diff = float64_diff = 0.0
    causal_mask = True
    for c, r in zip(cap, ref, strict=True):
        logits = c.logits
        eager_diff = max(eager_diff, (c.weights - r).abs().max().item())
        softmax_diff = max(softmax_diff, (torch.softmax(logits, dim=-1) - c.weights).abs().max().item())
        float64_diff = max(float64_diff, (recompute_float64(c).weights - c.weights.double()).abs().max().item())
        causal_mask &= bool(torch.equal(torch.isneginf(logits), layer_mask(hf_config, c.layer, logits)))
    del ref
    report = {
        "weights vs eager output_attentions": eager_diff,
        "softmax(logits) vs weights": softmax_diff,
        "float64 weights vs weights": float64_diff,
        "masked entries = each layer's causal mask, all -inf": causal_mask,
    }
    if prefix is not None:
        seq = cap.seq_len
        if not 1 <= prefix <= seq:
            raise ValueError(f"prefix must lie in 1..{seq}, got {prefix}")
        report.update(prefix_difference(cap, capture(model, ids[..., :prefix])))
    if longer is not None:
        report.update(prefix_difference(longer, cap))
    return report


def layer_mask(config, layer: int, like: torch.Tensor) -> torch.Tensor:
    """The mask a layer should apply, from the model's config alone, shaped like ``like`` (…, q, k): True where key
    n is hidden from query t. Causal (n > t), and on a sliding-window layer (``config.layer_types[layer] ==
    "sliding_attention"``, Gemma 3, Mistral-style ``sliding_window``) also n <= t - window."""
    q_len, k_len = like.shape[-2:]
    t = torch.arange(k_len - q_len, k_len, device=like.device).unsqueeze(-1)
    n = torch.arange(k_len, device=like.device)
    hidden = n > t
    types = getattr(config, "layer_types", None)
    window = getattr(config, "sliding_window", None)
    sliding = types[layer] == "sliding_attention" if types else window is not None
    if sliding and window is not None:
        hidden = hidden | (n <= t - int(window))
    return hidden.expand(like.shape)


def prefix_difference(long: Capture, short: Capture) -> dict:
    """Differences between rows 0..L'−1 of a length-L capture and a capture of the first L' tokens.

    For a causal model they agree up to float rounding (matrix products of different shapes may accumulate in a
    different order, and the layers propagate those last-bit differences): one pass at the longest L serves every
    shorter L. Reports the max absolute difference of the weights and the max absolute difference of the finite
    logits relative to their largest magnitude; masked (−inf) entries must coincide exactly (else ``inf``).
    """
    n = short.seq_len
    if long.seq_len < n or long.layer_ids != short.layer_ids:
        raise ValueError("long must capture at least as many tokens, and the same layers, as short")
    if not torch.equal(long.input_ids[..., :n], short.input_ids):
        raise ValueError("short must capture a prefix of long's input_ids")
    weights = logits = 0.0
    for a, b in zip(long, short, strict=True):
        weights = max(weights, (a.weights[..., :n, :n] - b.weights).abs().max().item())
        short_logits = b.logits
        scale = short_logits.masked_fill(b.masked, 0).abs().max().item() or 1.0
        logits = max(logits, _finite_diff(a.logits[..., :n, :n], short_logits) / scale)
    tag = f"rows 0..{n - 1} of L={long.seq_len} vs L={n}"
    return {f"{tag} (weights)": weights, f"{tag} (logits, relative)": logits}


def _finite_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max |a − b| over the finite entries; ``inf`` unless the −inf entries coincide."""
    masked = torch.isneginf(a)
    if not torch.equal(masked, torch.isneginf(b)):
        return float("inf")
    return (a - b).masked_fill_(masked, 0).abs().max().item()


def measure_capture(model, input_ids, interval: float = 0.005) -> dict:
    """Time one :func:`attnlimits.models.capture` and sample this process's RSS while it runs.

    Returns seconds, peak RSS, RSS before, the bytes the capture holds, and the capture itself.
    """
    import psutil

    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = [baseline]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        cap = capture(model, input_ids)
        seconds = time.perf_counter() - started
        peak[0] = max(peak[0], process.memory_info().rss)
    finally:
        stop.set()
        sampler.join()
    stored = sum(c.nbytes for c in cap)
    return {
        "seq_len": cap.seq_len,
        "seconds": seconds,
        "peak_rss_gb": peak[0] / 1e9,
        "rss_before_gb": baseline / 1e9,
        "captured_gb": stored / 1e9,
        "capture": cap,
    }


#: The report's check that is a measurement, not a pass/fail check: how far float32 is from float64 itself.
MEASURED_ONLY = ("float64 weights vs weights",)


def exactness_table(report: dict, *, tolerance: float = 1e-6, rows_tolerance: float = 1e-5):
    """:func:`exactness_report` as the table the Experiments chapter shows: one row per check (the index), its max
    abs difference, its tolerance and whether it holds.

    A True/False check is exact. A difference within one capture is held to ``tolerance`` (the capture *is* the
    eager computation, so only float rounding of the same sums remains); one between two forward passes of
    different lengths (the ``rows ...`` checks of :func:`prefix_difference`) to ``rows_tolerance`` (float32
    rounding carried through every layer). The checks of :data:`MEASURED_ONLY` show "—" for tolerance and holds.
    """
    import pandas as pd

    if not report:
        raise ValueError("report: empty; pass what exactness_report returned")
    rows = []
    for check, value in report.items():
        if isinstance(value, bool):
            rows.append((check, value, "exact", value))
        elif check in MEASURED_ONLY:
            rows.append((check, f"{value:.2e}", "—", "—"))
        else:
            tol = rows_tolerance if check.startswith("rows") else tolerance
            rows.append((check, f"{value:.2e}", f"{tol:.0e}", value <= tol))
    return pd.DataFrame(rows, columns=["check", "max abs difference", "tolerance", "holds"]).set_index("check")
