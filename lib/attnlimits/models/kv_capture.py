"""A capture that scales to long windows: the model runs its own SDPA attention while q, k and v are recorded.

:func:`attnlimits.experiments.capture_windows` runs the eager attention, which holds every layer's (H, L, L)
weights: 1,024 tokens cost megabytes, 32,768 tokens would cost tens of gigabytes per layer. Here each attention
layer records its post-RoPE queries, its keys and values (grouped-query heads not expanded) and the window its
mask applies, then computes its output with transformers' SDPA attention, in blocks of query rows on a
sliding-window layer (each block reads only the keys its rows can see). No (H, L, L) tensor of weights is ever
formed: :class:`LongCapture` recomputes the logits of the query rows a study asks for, one layer at a time, with
the mask rebuilt from the recorded window. Memory is ``(H + 2 H_kv) * L * d_head`` floats per layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlimits import models
from attnlimits.infra.progress import progress_bar
from attnlimits.models import windows
from attnlimits.models.capturing import Capture, Recorder, query_rows

__all__ = ["IMPLEMENTATION", "QUERY_BLOCK", "KVLayer", "LongCapture", "capture_ids", "capture_long", "exactness"]

#: The name the recording attention is registered under in transformers' AttentionInterface.
IMPLEMENTATION = "attnlimits_sdpa_capture"
#: Query rows per SDPA call on a layer with a mask (a sliding window): bounds what one call holds.
QUERY_BLOCK = 1024


@dataclass
class KVLayer:
    """One layer's post-RoPE queries ``q`` (1, H, L, d), keys and values ``k_kv``, ``v_kv`` (1, H_kv, L, d), the
    scale of its logits and its sliding ``window`` (None: plain causal; row t sees ``t - window < n <= t``)."""

    layer: int
    q: torch.Tensor
    k_kv: torch.Tensor
    v_kv: torch.Tensor
    scaling: float
    window: int | None

    @property
    def seq_len(self) -> int:
        return self.q.shape[-2]

    @property
    def kv_heads(self) -> int:
        return self.k_kv.shape[1]

    def _expanded(self, t: torch.Tensor) -> torch.Tensor:
        n_rep = self.q.shape[1] // self.kv_heads
        return t.repeat_interleave(n_rep, dim=1) if n_rep > 1 else t

    @property
    def k(self) -> torch.Tensor:
        """The keys of every query head (grouped-query heads expanded as the model does), (1, H, L, d)."""
        return self._expanded(self.k_kv)

    @property
    def v(self) -> torch.Tensor:
        """The values of every query head, (1, H, L, d)."""
        return self._expanded(self.v_kv)


class LongCapture(Capture):
    """A :class:`attnlimits.models.Capture` of :class:`KVLayer` records (``cap[layer]``): the same ``logits`` and
    ``inputs`` (so every kernel of the experiments reads it), with the masks rebuilt from each layer's window."""

    def window(self, layer: int, L: int) -> int | None:
        w = self[layer].window
        return None if w is None or L <= w else w

    def logits(self, layer: int, L: int, first_row: int = 0, rows: torch.Tensor | None = None) -> torch.Tensor:
        lc = self[layer]
        rows = query_rows(L, first_row, rows, lc.q.device)
        if isinstance(rows, slice):
            rows = torch.arange(first_row, L, device=lc.q.device)
        n_rep = lc.q.shape[1] // lc.kv_heads
        q = lc.q[0, :, rows].unflatten(0, (lc.kv_heads, n_rep))  # (H_kv, rep, R, d): no expanded keys are formed
        logits = torch.matmul(q, lc.k_kv[0, :, :L].transpose(-1, -2).unsqueeze(1)).flatten(0, 1).mul_(lc.scaling)
        t, n = rows.unsqueeze(-1), torch.arange(L, device=rows.device)
        hidden = n > t
        if lc.window is not None:
            hidden |= n <= t - lc.window
        return logits.masked_fill_(hidden, float("-inf"))


_registered = False
_recorder = Recorder(IMPLEMENTATION)


def _window_of(mask: torch.Tensor | None, length: int) -> int | None:
    """The sliding window of a boolean SDPA mask (True: attend) over ``length`` tokens, None when it is the plain
    causal mask; anything else is refused (checked row block by row block, never as one (L, L) temporary)."""
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise NotImplementedError(f"the long capture reads boolean SDPA masks, got {mask.dtype}")
    visible = mask[0, 0]
    width = int(visible[-1].sum())
    window = None if width >= length else width
    n = torch.arange(length, device=mask.device)
    for r0 in range(0, length, QUERY_BLOCK):
        t = torch.arange(r0, min(length, r0 + QUERY_BLOCK), device=mask.device).unsqueeze(-1)
        want = n <= t if window is None else (n <= t) & (n > t - window)
        if not torch.equal(visible[r0 : r0 + QUERY_BLOCK], want):
            raise NotImplementedError("an attention mask is neither causal nor a causal sliding window")
    return window


def _recording_sdpa(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention registered under :data:`IMPLEMENTATION`: record q, k, v and the window, then run SDPA."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    length = query.shape[-2]
    state = _recorder.state
    if state is None:
        window = _window_of(attention_mask, length)
    else:  # the layers of one kind share one mask: check it once per forward pass
        mask_id = None if attention_mask is None else (attention_mask.data_ptr(), tuple(attention_mask.shape))
        if mask_id not in state["windows"]:
            state["windows"][mask_id] = _window_of(attention_mask, length)
        window = state["windows"][mask_id]
    layer = getattr(module, "layer_idx", None)
    if state is not None and (state["layers"] is None or layer in state["layers"]):
        scale = query.shape[-1] ** -0.5 if scaling is None else float(scaling)
        record = KVLayer(layer, query.detach(), key.detach(), value.detach(), scale, window)
        state["records"].append(record)
    if attention_mask is None:
        return sdpa_attention_forward(module, query, key, value, None, scaling=scaling, dropout=dropout, **kwargs)
    parts = []
    for r0 in range(0, length, QUERY_BLOCK):
        r1 = min(length, r0 + QUERY_BLOCK)
        k0 = 0 if window is None else max(0, r0 - window + 1)  # the first key any row of the block sees
        out, _ = sdpa_attention_forward(
            module,
            query[:, :, r0:r1],
            key[:, :, k0:r1],
            value[:, :, k0:r1],
            attention_mask[:, :, r0:r1, k0:r1],
            scaling=scaling,
            dropout=dropout,
            is_causal=False,
            **{k: v for k, v in kwargs.items() if k != "is_causal"},
        )
        parts.append(out)
    return torch.cat(parts, dim=1), None


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(IMPLEMENTATION, _recording_sdpa)
    AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)  # boolean masks, None where causal suffices
    _registered = True


def capture_long(
    model,
    text,
    *,
    length: int,
    count: int = 1,
    first_window: int = 0,
    layers=None,
    progress: bool | str | None = None,
) -> list[LongCapture]:
    """Capture ``count`` consecutive windows of ``length`` tokens of ``text`` (from window ``first_window`` on, as
    :func:`attnlimits.experiments.capture_windows` cuts them), one SDPA forward pass each; ``layers``: the layer
    numbers to keep (all by default). Refused with a clear error beyond the model's context or the text."""
    from attnlimits.models.windows import window_bos, windows

    facts = models.facts(model)
    if facts.get("max_positions") is not None and length > facts["max_positions"]:
        raise ValueError(f"length: {length} tokens exceed the model's context of {facts['max_positions']}")
    if isinstance(first_window, bool) or not isinstance(first_window, int) or first_window < 0:
        raise ValueError(f"first_window: must be an integer >= 0, got {first_window!r}")
    keep = None if layers is None else {int(i) for i in layers}
    if keep is not None and (not keep or not keep <= set(range(facts["n_layers"]))):
        raise ValueError(f"layers: must be a non-empty subset of 0..{facts['n_layers'] - 1}, got {sorted(keep)}")
    ids = windows(model, text, length=length, count=first_window + count)[first_window:]
    with_bos = window_bos(model) is not None
    return [
        capture_ids(model, row, index=first_window + i, layers=keep, bos=with_bos)
        for i, row in enumerate(progress_bar(ids, "capture (SDPA)", progress))
    ]


def capture_ids(model, ids, *, index: int = 0, layers=None, bos: bool = False) -> LongCapture:
    """One SDPA forward pass over the token ids ``ids`` (1-D), recorded as a :class:`LongCapture` (window number
    ``index``; ``layers``: the layer numbers to keep, all by default; ``bos``: whether ``ids`` starts with BOS)."""
    hf = getattr(model, "model", model)
    device = next(hf.parameters()).device
    _register()
    ids = torch.as_tensor(ids).reshape(1, -1).to(device)
    state = {"layers": None if layers is None else set(layers), "records": [], "windows": {}}
    seconds = _recorder.run(hf, ids, state)
    if not state["records"]:
        raise RuntimeError(f"{type(hf).__name__} recorded no attention layer: is it built on AttentionInterface?")
    return LongCapture(layers=state["records"], input_ids=ids, seconds=seconds, index=index, bos=bos)


def exactness(model, text, *, length: int = 1024):
    """The SDPA capture against the eager one on the first window of ``length`` tokens, per layer type: the largest
    difference of the float32 weights, the largest relative difference of the logits and of the values, and
    whether every layer's window agrees. A model with sliding-window layers needs ``length`` beyond its window
    for the check to reach them."""
    import pandas as pd

    ids = windows.windows(model, text, length=length, count=1)[0]
    eager = windows.capture_windows(model, text, length=length, count=1)[0]
    sdpa = capture_ids(model, ids)
    rows = []
    for layer in eager.layer_ids:
        a, b = eager.logits(layer, length), sdpa.logits(layer, length)
        finite = torch.isfinite(a)
        same_mask = bool(torch.equal(finite, torch.isfinite(b)))
        scale = a[finite].abs().max().item() or 1.0
        wa, wb = torch.softmax(a, -1), torch.softmax(b, -1)
        va, vb = eager[layer].v[0, :, :length], sdpa[layer].v[0, :, :length]
        rows.append({
            "layer": layer,
            "layer type": "full" if sdpa.window(layer, length) is None else "sliding",
            "weights (max abs diff)": (wa - wb).abs().max().item(),
            "logits (max rel diff)": (a - b).masked_fill(~finite, 0).abs().max().item() / scale,
            "values (max rel diff)": (va - vb).abs().max().item() / (va.abs().max().item() or 1.0),
            "same mask and window": same_mask and eager.window(layer, length) == sdpa.window(layer, length),
        })  # fmt: skip
    table = pd.DataFrame(rows)
    return (
        table.groupby("layer type")
        .agg(
            {
                "layer": "count",
                "weights (max abs diff)": "max",
                "logits (max rel diff)": "max",
                "values (max rel diff)": "max",
                "same mask and window": "all",
            }
        )
        .rename(columns={"layer": "layers"})
    )
