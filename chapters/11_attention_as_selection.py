# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: mystnb,tags,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: execution,jupytext,kernelspec,mystnb
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Attention as normalised selection
#
# **Data:** synthetic only — seeded Gaussian logits and points on a circle, in float64. No pretrained model is
# used in this chapter.
#
# This chapter fixes the notation of the whole book, shows the five normalisers the book compares on the same
# logits, and rebuilds the paper's Figure 1 {cite}`mudarisov2025limitations` from actual points and weights.

# %%
import numpy as np
import torch

import attnlimits as al
from attnlimits.infra import plotting, sentences
from attnlimits.theory import figures, sweeps, synthetic

plotting.set_theme()

# %% [markdown]
# ## The setting
#
# A head sees $L$ tokens $x_1, \dots, x_L \in \mathbb R^d$. A query $q$ and keys $k_n$ give the logits
# $l_n = q \cdot k_n$, and softmax with temperature $T > 0$ turns them into weights
#
# $$
# \alpha_n = \frac{\exp(l_n / T)}{\sum_{j=1}^{L} \exp(l_j / T)}, \qquad n = 1, \dots, L .
# $$
#
# Transformers use $T = \sqrt{d_{\text{head}}}$ {cite}`vaswani2017attention`. The paper studies the general
# normaliser
#
# $$
# \alpha_n = \frac{F(l_n, \theta)}{\sum_{j=1}^{L} F(l_j, \theta)},
# $$
#
# with $F$ smooth and positive and parameters $\theta \in \mathbb R^c$ that may hold $T$ — or the length $L$
# itself. Whether $\theta$ knows $L$ is what decides, in the next chapter, whether the weights must vanish.
#
# Attention *selects*: the top-$N$ set $I_N$ holds the indices of the $N$ largest weights (ties go to the lower
# index), and the **context vector** of the selection is
#
# $$
# s = \sum_{i \in I_N} \alpha_i x_i .
# $$
#
# Everything the paper proves is about how well $s$ still represents the selected tokens, and how well the
# weighted tokens $\alpha_i x_i$ can be told apart from the rest, as $L$ and $N$ grow.

# %% [markdown]
# ## Five normalisers on the same logits
#
# | Name | Weights | $\theta$ knows $L$? |
# |---|---|---|
# | softmax | $\exp(l_n/T) / \sum_j \exp(l_j/T)$ | no |
# | sparsemax {cite}`martins2016sparsemax` | Euclidean projection of $l/T$ onto the simplex: exact zeros | no |
# | 1.5-entmax {cite}`peters2019sparse` | between softmax and sparsemax: exact zeros, smoother | no |
# | Scalable-Softmax {cite}`nakanishi2025scalable` | softmax of $s \log(L)\, l / T$ | **yes** |
# | adaptive temperature {cite}`velickovic2024softmax` | softmax of $\beta(H)\, l/T$, $\beta$ from the entropy | via $H$ |
#
# All five share one calling convention in the library, `al.normalizers.NAME(logits, dim=-1, **params)`, and are
# collected in `al.normalizers.NORMALIZERS` as its "paper" family (the "recent" family holds the variants proposed
# since the paper, {doc}`36_recent_normalizers`). Here they all see the same 32 Gaussian logits.

# %% mystnb={"image": {"alt": "Bar charts: the weights each normaliser gives the same 32 logits, sorted"}}
L_demo = 32
logits = 2.0 * torch.randn(
    L_demo, generator=torch.Generator().manual_seed(11), dtype=torch.float64
)
paper = al.normalizers.names("paper")
weights = {name: al.normalizers.NORMALIZERS[name](logits) for name in paper}
fig = figures.normalizer_weights_figure(logits, weights)
plotting.finish(fig, "normalisers_same_logits")

# %% [markdown]
# Sparsemax and 1.5-entmax put exact zeros on the tail; softmax and its two variants never do. The decisive
# difference shows only when the context grows. Below, for each length $L$ we draw 16 rows of bounded logits
# (the setting of the next chapter's Lemma 1) and track the median of the largest weight. Left: all $L$ logits
# i.i.d. uniform on $[-2, 2]$. Right: one "needle" token at logit $2$ and $L - 1$ distractors uniform on
# $[-2, 0.5]$, so the needle leads by a gap of at least $1.5$.

# %% mystnb={"image": {"alt": "Log-log plot: largest weight against sequence length for each normaliser"}}
lengths = np.unique(np.logspace(0.3, 5, 12).astype(int))
by_gap = {
    gap: sweeps.max_weight_sweep(lengths, logit_bound=2.0, gap=gap, draws=16, seed=0)
    for gap in (0.0, 1.5)
}
fig = figures.max_weight_figure(by_gap)
plotting.finish(fig, "max_weight_vs_length")

# %% [markdown]
# The slope of each curve on the log–log plot, fitted for $L \ge 100$, is the exponent $p$ in
# $\max_n \alpha_n \propto L^{p}$; $p = -1$ is the $\Theta(1/L)$ of the next chapter.

# %%
slopes = sweeps.max_weight_slopes(by_gap, min_length=100).round(2)
slopes

# %% tags=["remove-cell"]
# seeded synthetic data: every run is the one the prose describes
escape = ["sparsemax", "1.5-entmax", "scalable-softmax"]
_ = sentences.assert_sentences({
    "softmax and adaptive temperature fall like 1/L (slopes below -0.9)": (
        slopes.loc[["softmax", "adaptive-temperature"]] < -0.9
    ).all().all(),
    "with a gap the sparse maps and Scalable-Softmax keep a large top weight": (
        slopes.loc[escape, "gap 1.5"] > -0.1
    ).all(),
    "without a gap they decay like a power of L (slopes below -0.4)": (
        slopes.loc[escape, "gap 0.0"] < -0.4
    ).all(),
}, described=True)

# %% [markdown]
# Softmax falls like $1/L$ in both settings (fitted slopes near $-1$), and so does the adaptive temperature at long contexts: its
# polynomial $\beta(H)$ is clipped to 1 once the entropy is large, so it behaves like softmax. With a clear gap
# (right), sparsemax and 1.5-entmax zero out the distractors and Scalable-Softmax's $\log L$ factor outgrows the
# $L - 1$ competitors: all three keep a large top weight. Without a gap (left), the top logits crowd together
# as $L$ grows and even the sparse maps spread their mass over a growing support, decaying like a power of $L$
# slower than $1/L$. Escaping $\Theta(1/L)$ takes both a normaliser that can ignore the tail and a signal that
# stands out from it; the next chapter proves why a length-independent, strictly positive $F$ never can.

# %% [markdown]
# ## Selection, the context vector and the ball $B_r(s)$
#
# The paper asks whether a selected token stays *geometrically distinguishable*: selected token $i \in I_N$ is
# distinguishable when its weighted embedding $\alpha_i x_i$ lies in the ball $B_r(s)$ around the context
# vector while every non-selected $\alpha_j x_j$ lies outside it. With the radius the paper uses,
#
# $$
# r = \min_{j \notin I_N} \lVert s - \alpha_j x_j \rVert ,
# $$
#
# the second condition holds by construction, and $N_s$ counts the selected tokens with
# $\lVert \alpha_i x_i - s \rVert \le r$. The quantity of interest is the fraction $N_s / N$.
#
# To draw it, $L$ tokens lie at random angles on the circle of radius $M = 1$ in $\mathbb R^2$, and the weights
# are softmax of i.i.d. $\mathcal N(0, 1.5^2)$ logits drawn independently of the positions — as in a real head,
# where $\alpha$ comes from query–key logits while $x$ are the value vectors. The three panels rebuild the
# paper's Figure 1: (a) the tokens and the selected set; (b) the weighted tokens $\alpha_n x_n$, the context
# vector $s$ and the ball $B_r(s)$ for $L = 16$, $N = 4$; (c) the same for $L = 64$, $N = 16$.

# %% mystnb={"image": {"alt": "Tokens on a circle, scaled by their weights, and the ball around the context vector"}}
x16 = synthetic.circle_tokens(16, seed=0)
alpha16 = synthetic.gaussian_softmax(16, scale=1.5, seed=100)
x64 = synthetic.circle_tokens(64, seed=0)
alpha64 = synthetic.gaussian_softmax(64, scale=1.5, seed=100)
fractions = {
    "L=16, N=4": al.selection.distinguishable_fraction(alpha16, x16, 4).item(),
    "L=64, N=16": al.selection.distinguishable_fraction(alpha64, x64, 16).item(),
}
fig = figures.selection_geometry_figure((x16, alpha16, 4), (x64, alpha64, 16))
plotting.finish(fig, "figure1_selection_geometry")

# %% [markdown]
# The weights shrink every token towards the origin, and the context vector, a sum of $N$ of them, sits away
# from all of them. The ball may not reach any non-selected weighted token, so a selected token whose weight is
# small, or whose direction opposes the rest of the selection, ends up outside it: the selection is no longer
# visible in the geometry for that token. With more tokens and a larger selection (c) the weighted tokens crowd
# near the origin, selected and non-selected alike; a single draw says little about the fraction, whose
# expectation {doc}`14_geometric_separability` bounds. The Theory chapters quantify each effect:
# {doc}`12_vanishing_attention` (weights shrink like $1/L$), {doc}`13_distance_collapse` (the context vector
# drifts to that of a random selection) and {doc}`14_geometric_separability` (how many selected tokens remain
# distinguishable).

# %%
print({k: round(v, 3) for k, v in fractions.items()})
