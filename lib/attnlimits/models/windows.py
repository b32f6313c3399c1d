"""One capture per window of a text (a Hugging Face model, one forward pass each), the weights recomputed per layer
on demand from the captured queries and keys."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from attnlimits.core.normalizers import NORMALIZERS
from attnlimits.infra.progress import progress_bar

__all__ = [
    "PRECISIONS",
    "TOKENS",
    "WindowCapture",
    "capture_windows",
    "check_windows",
    "dtype_of",
    "query_rows",
]


# ----------------------------------------------------------------------------------------------------------------
# captures: one forward pass per window, the weights recomputed per layer on demand (memory stays bounded)
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class WindowCapture:
    """One window's per-layer queries, keys, values and scaling (the attention weights are recomputed from them).

    ``index`` is the window's position in the text (0 = the first window after the first chapter heading);
    ``residual`` holds the layers' input residual streams when they were asked for and ``embedding`` the input token
    embeddings (:func:`capture_windows` always keeps them); ``bos``: whether the window starts with the
    tokenizer's BOS token (then token 0 is that BOS).
    """

    index: int
    layers: list  # of attnlimits.models.LayerCapture (their weights may be dropped: they are recomputed)
    residual: dict | None = None  # layer number -> that layer's input residual stream (1, L, d_model)
    seconds: float = 0.0  # how long this window's capture took (its forward passes)
    embedding: torch.Tensor | None = None  # the embedding layer's output (1, L, d_model), before layer 0
    bos: bool = False

    def __post_init__(self):
        self._by_layer = {lc.layer: lc for lc in self.layers}

    @property
    def layer_ids(self) -> list[int]:
        """The captured layers' numbers, in increasing order."""
        return sorted(self._by_layer)

    @property
    def seq_len(self) -> int:
        """The window's length in tokens."""
        return self.layers[0].seq_len

    def layer(self, layer: int):
        """The :class:`attnlimits.models.LayerCapture` of layer number ``layer``."""
        if layer not in self._by_layer:
            raise KeyError(f"layer: {layer} was not captured; captured layers are {self.layer_ids}")
        return self._by_layer[layer]

    def window(self, layer: int, L: int) -> int | None:
        """The sliding window w of a layer over the first L tokens (row t sees ``t - w < n <= t``), read from the
        mask the model itself applied; None when that mask is the plain causal one (always for L <= w)."""
        visible = ~self.layer(layer).masked[0, 0, :L, :L]
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
        return self.layer(layer).q.shape[1]

    @property
    def device(self) -> torch.device:
        """Where the capture's tensors are (the model's device)."""
        return self.layers[0].q.device

    def logits(self, layer: int, L: int, first_row: int = 0, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The model's own float32 logits of the first L tokens, ``(H, R, L)``, masked entries -inf: the query rows
        ``first_row..L-1`` (all of them by default), or only the query positions ``rows`` (a 1-D integer tensor of
        positions below L, in that order)."""
        lc = self.layer(layer)
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
        if normalizer is not None and normalizer not in NORMALIZERS:
            raise ValueError(f"normalizer: must be None (softmax) or one of {list(NORMALIZERS)}, got {normalizer!r}")
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
        the
        same masked logits (masked entries get weight 0), in ``precision``.
        """
        dtype = dtype_of(precision)
        alpha = self.weights(layer, L, precision=precision, normalizer=normalizer, first_row=first_row, rows=rows)
        if exclude_sink:
            alpha = alpha.clone()
            alpha[..., 0] = 0
            alpha = alpha / alpha.sum(-1, keepdim=True).clamp_min(torch.finfo(alpha.dtype).tiny)
        if tokens == "value":
            return alpha, self.layer(layer).v[0, :, :L].to(dtype)
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
    """The query rows :meth:`WindowCapture.logits` reads: ``first_row..L-1``, or the positions ``rows`` (checked:
    a 1-D tensor of positions below L, and no ``first_row``) on ``device``."""
    if rows is None:
        return slice(first_row, L)
    if first_row or rows.ndim != 1 or (len(rows) and not 0 <= int(rows.min()) <= int(rows.max()) < L):
        raise ValueError(f"rows: expected a 1-D tensor of positions below L = {L} (and no first_row)")
    return rows.to(device)


#: What the tokens x of :meth:`WindowCapture.inputs` are: the heads' values, the layer's input residual stream, or
#: the input token embeddings normalised to unit length.
TOKENS = ("value", "residual", "embedding")
PRECISIONS = {"float32": torch.float32, "float64": torch.float64}


def dtype_of(precision: str) -> torch.dtype:
    if precision not in PRECISIONS:
        raise ValueError(f"precision: must be one of {sorted(PRECISIONS)}, got {precision!r}")
    return PRECISIONS[precision]


def capture_windows(
    model,
    text,
    *,
    length: int,
    count: int,
    first_window: int = 0,
    tokens: str = "value",
    layers=None,
    progress: bool | str | None = None,
    bos: bool | None = None,
) -> list[WindowCapture]:
    """Capture ``count`` consecutive windows of ``length`` tokens (from window ``first_window`` on), one pass each;
    ``layers``: the layer numbers to keep (all by default).

    The windows are :func:`attnlimits.models.texts.windows`: with ``bos=None`` (the default) each starts with the
    tokenizer's BOS token exactly when the tokenizer adds one by default (Gemma 3 does; GPT-2 and SmolLM2 do not),
    keeping its ``length`` (``[BOS]`` and ``length - 1`` text tokens); each capture records it in ``bos``.
    Every capture keeps the input token embeddings (``length * d_model`` floats per window: the tokens of
    Algorithm 4's second reading); ``tokens="residual"`` also keeps the layers' input residual streams (that many
    floats per layer). ``tokens="value"`` and ``"embedding"`` capture the same. A TransformerLens
    ``HookedTransformer`` is captured by :func:`attnlimits.models.lens.capture_windows`
    (:func:`attnlimits.experiments.capture_windows` takes either).
    """
    from attnlimits import models
    from attnlimits.models import texts

    if tokens not in TOKENS:
        raise ValueError(f"tokens: must be one of {TOKENS}, got {tokens!r}")
    if isinstance(first_window, bool) or not isinstance(first_window, int) or first_window < 0:
        raise ValueError(f"first_window: must be an integer >= 0, got {first_window!r}")
    ids = texts.windows(model, text, length=length, count=first_window + count, bos=bos)[first_window:]
    with_bos = texts.window_bos(model, bos) is not None
    out = []
    for i, row in enumerate(progress_bar(ids, "capture", progress)):
        started = time.perf_counter()
        cap = models.capture(model, row, layers=layers)
        kept = [dataclasses.replace(lc, weights=lc.weights.new_empty(0)) for lc in cap]  # recomputed: free them
        residual = _residual_stream(model, row, cap.layer_ids) if tokens == "residual" else None
        embedding = _input_embedding(model, row)
        seconds = time.perf_counter() - started
        out.append(
            WindowCapture(
                index=first_window + i,
                layers=kept,
                residual=residual,
                seconds=seconds,
                embedding=embedding,
                bos=with_bos,
            )
        )
    return out


def _input_embedding(model, ids) -> torch.Tensor:
    """The embedding layer's output for ``ids``, (1, L, d_model): what layer 0 reads, before any position
    embedding (GPT-2 adds its own afterwards) and including the model's own scaling (Gemma's sqrt(d_model))."""
    hf = getattr(model, "model", model)
    with torch.inference_mode():
        return hf.get_input_embeddings()(ids.unsqueeze(0).to(next(hf.parameters()).device)).detach()


def _residual_stream(model, ids, layer_ids) -> dict:
    hf = getattr(model, "model", model)
    body = getattr(hf, hf.base_model_prefix, hf)
    with torch.inference_mode():
        hidden = body(
            input_ids=ids.unsqueeze(0).to(next(hf.parameters()).device), output_hidden_states=True, use_cache=False
        ).hidden_states
    return {layer: hidden[layer].detach() for layer in layer_ids}  # hidden_states[l] is the input of layer l


def check_windows(windows) -> None:
    if not windows or not all(isinstance(w, WindowCapture) for w in windows):
        raise ValueError("windows: expected a non-empty list of WindowCapture (see capture_windows)")
