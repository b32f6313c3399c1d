# ---
# jupyter:
#   execution:
#     timeout: 1800
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
#   mystnb:
#     execution_timeout: 1800
# ---

# %% [markdown]
# # The alternative normalisers under the paper's diagnostics
#
# **Data:** seeded synthetic heads (float64), then the pretrained model and the text named in the banner further
# down (GPT-2 on *War and Peace* when they can be loaded, else the offline fallbacks): one window, a few layers,
# every head; for the sink rate, the models and controls of {doc}`34_several_models` (the first of their windows).
# **Preset:** the `reduced` preset (24 synthetic heads of 4 rows, lengths up to 256; 4
# layers of the model, 4 query rows per length, lengths up to 256); `ATTNLIMITS_PRESET=full` or papermill's
# `preset="full"` runs the larger grids.
#
# The paper {cite}`mudarisov2025limitations` recommends sparse normalisers (sparsemax, $\alpha$-entmax),
# length-aware ones (Scalable-Softmax) and temperature control, but measures none of them. Here each normaliser
# of {doc}`11_attention_as_selection` gets the paper's diagnostics on *the same logits* (the variants proposed
# since the paper are in {doc}`36_recent_normalizers`): the largest weight
# against $L$ (vanishing attention), the distances $\tilde d$ and $E$ and the critical $N$ (distance collapse),
# the separable fraction $N_s/N$ (geometric separability), and the Jacobian's spectral norm and Algorithm 5's
# $g(T, \varepsilon)$ (gradient sensitivity).

# %%
from attnlimits import studies

preset = studies.book_preset()
studies.restore()  # the shipped results/ into the cache: read, not computed

# %%
import textwrap

import numpy as np

import attnlimits as al
from attnlimits.infra import plotting, profiling, sentences
from attnlimits.studies import alternatives, several_models, training

plotting.set_theme()
alt = alternatives
show = alternatives.report  # chapter 33's tables and figures
times = profiling.Steps()
paper = al.normalizers.names("paper")  # the paper's family; the later ones: chapter 36
# computed once by `make results`, then read from results/alternatives/
with times.step("read the synthetic heads' diagnostics"):
    syn = alt.results(preset=preset).only(paper)
print(textwrap.fill(f"preset {alt.get_preset(preset)}", 88, subsequent_indent="    "))

# %% [markdown]
# ## Synthetic heads
#
# Each of the synthetic heads has Gaussian logits $\sigma_h\,\mathcal N(0, 1)$, with $\sigma_h$ spread
# geometrically from 0.5 to 4, and Gaussian token vectors; a shorter length is a prefix of the same draw. Every
# normaliser is applied at $T = 1$ with its default parameters (Scalable-Softmax $s = 1$).
#
# ### Vanishing attention

# %% mystnb={"image": {"alt": "Largest weight and share of non-zero weights against L for each normaliser, synthetic heads"}}
fig = show.vanishing_figure(syn.weights)
plotting.finish(fig, "33_vanishing")

# %% [markdown]
# *Figure: the median head's largest weight (left) and fraction of non-zero weights (right) against the length
# $L$, synthetic heads.*

# %%
vanish = show.max_weight_slopes(syn.weights)
vanish.to_frame().style.format("{:.2f}")

# %% tags=["remove-cell"]
assert vanish.idxmin() == "softmax"
assert (vanish.drop("softmax") > vanish["softmax"] / 2).all()

# %% [markdown]
# A length-independent normaliser has every weight $\Theta(1/L)$ (Lemma 1, {doc}`12_vanishing_attention`):
# slope $-1$ once $L$ is large against $e^{2\Delta/T}$. On these lengths softmax's largest weight falls
# fastest of the five, and every other normaliser's falls less than half as fast (the cell asserts both):
# the sparse maps concentrate on a support that shrinks relative to $L$, Scalable-Softmax sharpens the row
# as $L$ grows, and adaptive temperature sharpens the high-entropy rows.
#
# ### Distance, its random-selection counterpart and the critical N

# %% mystnb={"image": {"alt": "Distance and its random-selection expectation against L and N, and the separable fraction against N"}}
fixed_N = alt.get_preset(preset).fixed_N
fig = show.distance_figure(syn.distance, fixed_N)
plotting.finish(fig, "33_distance")

# %% [markdown]
# *Figure: mean over heads of the cumulative distance $\tilde d$ (solid) and of the random-selection
# expectation $E$ (dotted) against $L$ at fixed $N$ (left) and against $N$ at the largest $L$ (middle); the
# separable fraction $N_s/N$ against $N$ (right). Synthetic heads.*

# %%
show.critical_table(syn.critical).style.format("{:.3f}")

# %% [markdown]
# The critical fraction is Algorithm 3's decision on these heads: the first $N$ of the grid at which a
# two-sample Kolmogorov–Smirnov test (level 0.05) cannot tell the heads' mean $\tilde d$ from their mean $E$.
#
# ### Gradient sensitivity

# %% mystnb={"image": {"alt": "Jacobian spectral norms per normaliser as boxes, and g against temperature per normaliser"}}
fig = show.gradient_figure(syn.jacobian, syn.g)
plotting.finish(fig, "33_gradient")

# %% [markdown]
# *Figure: the spectral norm of the Jacobian $\partial\alpha/\partial l$ (largest over a head's rows, one box
# per normaliser over heads) at $T = 1$, and Algorithm 5's $g(T, \varepsilon)$ against the temperature.
# Synthetic heads at the largest length.*

# %% [markdown]
# ## The pretrained model's own logits
#
# The same diagnostics, post hoc, on one window of the model's text: for each captured layer and head, the
# query rows $t = m-1, \dots$ restricted to their first $m$ tokens (every such row sees all of them), the model's
# own scaled logits $q\cdot k/\sqrt{d_{\text{head}}}$ and value vectors. Each normaliser replaces softmax on the
# same logits; nothing is retrained, so this shows what each map does to the scores the model learned for
# softmax.
#
# **An illustration, not a measurement:** one window of one text, four layers, four query rows per length and no
# interval. It shows what each map does to one passage's logits; no verdict of the book rests on it, and the
# sentences at the end of the page describe this passage, not the model.

# %%
model = al.models.load()
text = al.texts.load()
al.models.banner(model, text)
with times.step("read the model's heads' diagnostics"):
    mod = alt.results(model, text, preset).only(paper)
print(f"layers {list(mod.layers.layer)}")

# %% mystnb={"image": {"alt": "On the model's logits: largest weight, share of non-zero weights against L, and g against temperature"}}
eps0 = syn.g.eps.min()  # the smallest eps of the preset
fig = show.model_figure(mod.weights, mod.g, eps0)
plotting.finish(fig, "33_model")

# %% [markdown]
# *Figure: on the model's own logits, the median head's largest weight and fraction of non-zero weights against
# the length, and $g(T, \varepsilon)$ against the temperature, per normaliser.*

# %% mystnb={"image": {"alt": "On the model's logits: distance and its random-selection expectation against L and N, and the separable fraction"}}
fig = show.distance_figure(mod.distance, fixed_N)
plotting.finish(fig, "33_model_distance")

# %% [markdown]
# *Figure: on the model's own logits and value vectors, the mean over heads of $\tilde d$ (solid) and $E$
# (dotted) against $L$ at fixed $N$ and against $N$ at the largest $L$, and the separable fraction $N_s/N$.*

# %%
show.critical_table(mod.critical).style.format("{:.3f}")

# %% [markdown]
# ### How much of the sparse maps' separability is their zeros
#
# A token of weight exactly 0 contributes $0$, so it sits at distance $\lVert s \rVert$ from the context
# vector $s$, selected or dropped. A sparse map's dropped zeros therefore put Algorithm 4's radius at
# $\lVert s \rVert$ or below, and when its support holds fewer than $N$ tokens its selected zeros lie on that
# sphere and count as separable. The table sets the separable fraction as Algorithm 4 counts it beside the same
# count with every zero-weight token left out — the radius is the nearest dropped token *of positive weight*,
# the fraction counts the selected of positive weight — on the rows where that comparison exists (a row whose
# support holds at most $N$ tokens drops nothing of positive weight: *rows compared* gives their share).

# %%
zeros = show.zero_weight_table(mod.distance)
softmax_ns = zeros.loc["softmax", "N_s/N"].rename("softmax's N_s/N")
zeros.loc[["sparsemax", "1.5-entmax"]].join(softmax_ns, on="N").round(3)

# %% [markdown]
# On the model's logits at the largest length, beside softmax's $N_s/N$ (for softmax both counts agree: its
# weights are all positive); NaN where no row can be compared. The other normalisers are in `zeros`
# (Scalable-Softmax's and adaptive temperature's sharpened rows also underflow to exact zeros now and then).

# %% [markdown]
# ## Two published anchors: Scalable-Softmax's first figure and the sink rate
#
# Two numbers that later papers published about the limits this book studies, recomputed here from their own
# definitions. The first is Figure 1 of Scalable-Softmax {cite}`nakanishi2025scalable`: a row of $n$ logits, all
# $-2$ but one at $+3$, whose largest weight softmax drives to 0 as $n$ grows (Lemma 1's $1/L$ at work) while
# Scalable-Softmax with the figure's $s = 0.43$ keeps it near 1.

# %% mystnb={"image": {"alt": "Largest weight against the row length n for softmax, which falls towards 0, and Scalable-Softmax with s = 0.43, which stays near 1"}}
lengths = np.union1d(np.logspace(0.3, 5, 60).round(), [149, 150]).astype(int)
anchor = alt.one_logit_apart(lengths.tolist())  # n = 1 + e^5 = 149.4 halves softmax
fig = show.one_logit_figure(anchor)
plotting.finish(fig, "33_ssmax_figure1")

# %% [markdown]
# *Figure: Scalable-Softmax's Figure 1 recomputed by this book's normalisers (one logit $+3$, the others $-2$,
# $s = 0.43$).*
#
# The second is the *sink rate* of Gu et al. {cite}`gu2025attention`: a head is a sink head when token 0's
# importance score — the mean weight the first 64 rows give it — exceeds 0.3, and the sink rate is the share of
# such heads. The table measures it on the models of {doc}`34_several_models` and their controls under each
# normaliser applied to the same logits (`softmax` is the model's own weights). For a row that does not sum to one
# the threshold is still an absolute weight. **An illustration:** each run's first window only, with no interval
# over passages; nothing is decided on it.

# %%
sink = several_models.results("reduced")  # read back from results/, no model loaded
rates = several_models.report.sink_rate_table(sink.manifest)[paper]
rates.style.format("{:.2f}")

# %% [markdown]
# Softmax's largest weight halves once the row is 150 long and is below 0.002 at $10^5$, while
# Scalable-Softmax's stays above 0.8 and rises towards 1, as the figure shows. The sink rate separates the
# causes that {doc}`34_several_models` sets apart: most of the trained models' heads are sink heads, their
# untrained networks none, and rows made as sharp as the trained ones (entropy-matched) almost none, while the
# trained models on shuffled tokens keep theirs. Swapping another normaliser in on the same logits does not
# remove the sink: every other normaliser of the five gives both trained models a sink rate at least as high
# as their own softmax does, since each sharpens a row whose largest logit is the sink's. A sink learned under
# softmax is in the logits, and no normaliser applied to them afterwards undoes it.

# %% [markdown]
# ## Which limitation each normaliser escapes, and at what cost
#
# One row per normaliser, every number computed above or in {doc}`32_training_low_temperature`:
#
# - *max-weight slope*: log-log slope of the median head's largest weight against $L$ on the model's logits
#   (vanishing attention: $-1$ is $1/L$, $0$ is no vanishing);
# - *critical N / L*: Algorithm 3's decision at the model's largest length;
# - *N_s/N*: the mean separable fraction at $N = $ the fixed $N$ and the largest length (model);
# - *‖J‖ mean*: mean over heads of the mean Jacobian spectral norm at $T = 1$ (model);
# - *g(0.01)*: Algorithm 5's $g$ at $T = 0.01$ (model);
# - *support*: median fraction of non-zero weights at the largest length (model);
# - *trained at T ≤ 0.03 / T = 1*: training runs of chapter 32 that reach the target loss;
# - *error at N/L = 1/2*: chapter 32's median relative error with half the tokens marked;
# - *µs per row*: one call on 256 rows of length 1024 on this machine (a measurement; it moves with the load).

# %%
train = training.results(training.get_preset(preset)).final
verdict = show.verdict_table(mod, train, alt.row_cost(1024), fixed_N, eps0)
verdict.style.format(precision=3)

# %% [markdown]
# ## What the numbers say
#
# Each sentence below is checked on the tables above when the page runs (the check is left off the rendered
# page): for the `reduced` preset and the model and text that build this book each must hold; on other runs the
# check prints those that do not.

# %% tags=["remove-cell"]
soft = verdict.loc["softmax"]
soft_z = zeros.loc["softmax"]
by_n = anchor.set_index("n")
trained_models = several_models.report.trained_labels(sink.manifest)
flat_controls = [f"{m} ({c})" for m in trained_models
                 for c in ("untrained", "entropy-matched")]
shuffled_models = [f"{m} (shuffled)" for m in trained_models]
ssmax = by_n["scalable-softmax"]
sparse_z = [zeros.loc[n] for n in ["sparsemax", "1.5-entmax"]]


def compared(z):
    return (z["rows compared"] > 0) & (z.index >= 2)


sparse = ["sparsemax", "1.5-entmax"]
others = [n for n in verdict.index if n != "softmax"]
claims = {
    "softmax's largest weight decays fastest with L on the model's logits":
        verdict["max-weight slope"].idxmin() == "softmax",
    "Scalable-Softmax's largest weight does not decay on the model (slope > -0.1)":
        verdict.loc["scalable-softmax", "max-weight slope"] > -0.1,
    "sparsemax and 1.5-entmax keep fewer than half as many non-zero weights as softmax":
        (verdict.loc[sparse, "support"] < 0.5 * soft.support).all(),
    "softmax's critical N / L is below every other normaliser's on the model":
        (verdict.loc[others, "critical N / L"] > soft["critical N / L"]).all(),
    "sparsemax and 1.5-entmax separate at least 0.1 more of the selected tokens":
        (verdict.loc[sparse, "N_s/N"] > soft["N_s/N"] + 0.1).all(),
    "softmax has the smallest mean Jacobian norm at T = 1 on the model's logits":
        verdict["‖J‖ mean"].idxmin() == "softmax",
    "no normaliser trains at T <= 0.03 in chapter 32":
        (verdict["trained at T ≤ 0.03"].str.split("/").str[0] == "0").all(),
    "sparsemax and 1.5-entmax fail at N/L = 1/2 (median relative error > 0.9)":
        (verdict.loc[sparse, "error at N/L = 1/2"] > 0.9).all(),
    "softmax's largest weight halves by n = 150 and is below 0.002 at n = 10^5":
        by_n.softmax[150] < 0.5 < by_n.softmax[149] and by_n.softmax.iloc[-1] < 0.002,
    "Scalable-Softmax's stays above 0.8 and rises towards 1":
        ssmax.min() > 0.8 and ssmax.is_monotonic_increasing,
    "sink rate: trained > 0.5; untrained and matched < 0.05; shuffled > 0.5": bool(
        (rates.loc[trained_models, "softmax"] > 0.5).all()
        and (rates.loc[flat_controls, "softmax"] < 0.05).all()
        and (rates.loc[shuffled_models, "softmax"] > 0.5).all()
    ),
    "every other normaliser gives the trained models a sink rate >= softmax's":
        (rates.loc[trained_models].drop(columns="softmax").ge(
            rates.loc[trained_models, "softmax"], axis=0)).all().all(),
    "for softmax both counts agree at every N":
        (soft_z["N_s/N"] - soft_z["N_s/N, weight > 0"]).abs().max() < 1e-12,
    "from N = 12 on no row of sparsemax drops a token of positive weight":
        (zeros.loc["sparsemax"].query("N >= 12")["rows compared"] == 0).all(),
    "without the zeros, sparsemax's and 1.5-entmax's N_s/N is lower at every N >= 2":
        all((z["N_s/N, weight > 0"] < z["N_s/N"])[compared(z)].all() for z in sparse_z),
    "there, both still separate more than softmax at the same N (N >= 2)":
        all((z["N_s/N, weight > 0"] > soft_z["N_s/N"])[compared(z)].all()
            for z in sparse_z),
}
model_id = model.provenance.as_dict().get("model_id")
this_run = (model_id, text.provenance.name, preset)
_ = sentences.assert_sentences(
    claims, described=sentences.describes(this_run, {"preset": "reduced"}),
    about="the reduced preset on the model and text that build this book")

# %% [markdown]
# - **Vanishing attention.** On the model's own logits softmax's largest weight falls fastest with the length
#   (though slowly: the model's heads were trained to concentrate, and many rows sit on one sink token);
#   Scalable-Softmax's does not fall at all — its $\log L$ factor sharpens the row as it grows, which is what
#   it was designed for — and the sparse maps keep a small support whose weights stay large.
# - **Distance collapse and separability.** Swapping softmax for any of the four alternatives on the same
#   logits pushes Algorithm 3's critical $N$ towards $L$ (the heads' mean $\tilde d$ stays distinguishable from
#   the random-selection $E$ longer), and the sparse maps separate clearly more of the selected tokens: exact
#   zeros put every dropped token at the same distance $\lVert s \rVert$ from the context vector. Left out of
#   the comparison, those zeros take much of the advantage with them: from $N = 12$ on, no row of sparsemax
#   drops a token of positive weight, so there is nothing left to tell apart, and where rows do, the fraction
#   without the zeros is lower than as counted at every $N \ge 2$. What remains on those rows is still above
#   softmax's at the same $N$ — but they are the rows whose support is wider than $N$, a minority beyond
#   $N = 2$ for sparsemax.
# - **The cost of sparsity is paid in training.** Sparsemax and 1.5-entmax zero out most weights (the *support*
#   column) — and with them the gradient of every token outside the support: in
#   {doc}`32_training_low_temperature` they fail to learn a selection of half the tokens, which softmax learns.
# - **Gradient sensitivity is not cured by any of them.** At $T = 1$ softmax has the *smallest* Jacobian of the
#   five on the model's logits (the others sharpen the row, and a sharper row is a more sensitive one), and at
#   $T \le 0.03$ no normaliser trains in chapter 32. The *µs per row* column gives the price in compute of each
#   map on the machine that ran this page (a timing, so it moves with the machine and its load).

# %% [markdown]
# ## Execution time
#
# The three computations behind chapters 32 and 33 run once and are cached under `results/` (`make results`
# fills the cache before the chapters run); re-executing either chapter reads them back. The table gives the
# wall time each took when it was computed for this preset, and the `full` preset's time extrapolated from it
# by the ratio of the work (token-steps of training, weight entries of the diagnostics) — an estimate, not a
# measurement.

# %%
show.execution_times(train, syn, mod, preset).style.format("{:.0f}")

# %% [markdown]
# Reading them back on the machine that built this page:

# %%
times.table()
