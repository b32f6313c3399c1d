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
# # Normalisers proposed after the paper
#
# **Data:** the pretrained model and the text named in the banner below (GPT-2 on *War and Peace* when they
# can be loaded, else the offline fallbacks): 8 windows spread over the whole text, 4 layers spread over the
# model, every head; for each length $m = 32, 64, 128, 256$ the query rows $t = m-1, \dots, m+2$ on their first
# $m$ tokens (every such row sees all of them). **Preset:** the `reduced` grids of
# {doc}`33_alternative_normalizers` on 8 windows; `ATTNLIMITS_PRESET=full` reads 16 windows and lengths up to 512.
# Every interval on this page is a 95 % Student-t interval over the 8 windows, the independent units.
#
# Since the paper {cite}`mudarisov2025limitations` appeared, several attention variants have been proposed
# against the very limits it describes: weights that vanish with the length, and the attention sink where a head
# parks the mass it does not need. This page puts four of them beside softmax under the paper's diagnostics, on
# the same logits, as {doc}`33_alternative_normalizers` does for the paper's own recommendations. Each is
# implemented here from its paper's formula:
#
# | Variant | One row of logits $l$ (length $n$) | Its headline claim |
# |---|---|---|
# | Softpick {cite}`zuhri2025softpick` | $\mathrm{ReLU}(e^{l_i} - 1) / (\sum_j \lvert e^{l_j} - 1\rvert + \epsilon)$ | no attention sink, sparse rows |
# | Softmax with a sink {cite}`kaul2025attention` | $e^{l_i} / (e^{s} + \sum_j e^{l_j})$, here $s = 0$ | first-token attention falls |
# | Sigmoid attention {cite}`ramapuram2025sigmoid` | $\sigma(l_i - \log n)$ | matches softmax in training |
# | Log-length scaling {cite}`chiang2022overcoming` | softmax of $l \cdot \max(1, \log n / \log n_0)$, $n_0 = 32$ | the largest weight does not vanish |
#
# A fifth, the critical attention scaling of arXiv:2510.05554, is softmax of $\gamma \log n \cdot l$:
# Scalable-Softmax with $s = \gamma$, swept over $\gamma$ below.
#
# All of them are applied *post hoc* to logits that the model learned for softmax. Two of the headline claims
# are about models *trained* with the variant (softpick's missing sink, the learned sink logit's smaller
# first-token weight): this page cannot test them, and says what the same maps do to a softmax model instead.

# %%
from attnlimits import studies

preset = studies.book_preset()
studies.restore()  # the shipped results/ into the cache: read, not computed

# %%
import attnlimits as al
from attnlimits.infra import plotting, profiling, sentences
from attnlimits.infra.statistics import t_interval
from attnlimits.studies import alternatives as alt
from attnlimits.studies import several_models, training

plotting.set_theme()
show = alt.report
grids = alt.RECENT_PRESETS[preset]
model = al.models.load()
text = al.texts.load()
al.models.banner(model, text)
times = profiling.Steps()
with times.step("read the model's heads' diagnostics"):
    mod = alt.results(model, text, grids)  # computed by `make results`, read back
times.add("compute them (make results)", mod.seconds.seconds.max())
print(f"{grids.model_windows} windows, layers {list(mod.layers.layer)}")

# %% [markdown]
# ## What a diagnostic means for a row that does not sum to one
#
# Softpick, the sink and sigmoid attention give rows that need not sum to one: a head may hand part of its mass
# to no token (softpick, the sink) or more than one unit of it to the tokens (sigmoid). Every diagnostic below
# reads the weights *as they are*, the vectors $y_i = \alpha_i x_i$ that the layer mixes:
#
# - *largest weight* and *row sum*: the numbers themselves (a distribution's row sum is 1);
# - $\tilde d$, $E$ and $E_{\text{full}}$: the same formulas on the $y_i$ (the context vector is what the layer
#   outputs for the selected tokens). Scaling a row by $c$ scales all three by $c$, so the critical $N$ compares
#   rows of different sums on one footing only as far as the heads' sums are alike;
# - $N_s/N$: the distances and the radius scale together, so the separable fraction does not depend on a row's
#   sum at all (a test checks this);
# - the Jacobian: of the map as it is, $\partial \alpha / \partial l$;
# - the sink rate: Gu et al.'s threshold of 0.3 on token 0's mean weight is an absolute weight
#   {cite}`gu2025attention`.

# %% mystnb={"image": {"alt": "On the model's logits: largest weight and share of non-zero weights against L, and g against temperature, for softmax and the four variants"}}
eps0 = mod.g.eps.min()
fig = show.model_figure(mod.weights, mod.g, eps0)
plotting.finish(fig, "36_model")

# %% [markdown]
# *Figure: on the model's own logits, the median head's largest weight and fraction of non-zero weights against
# the length (over every window), and Algorithm 5's $g(T, \varepsilon)$ against the temperature.*
#
# ## The diagnostics, with intervals over windows
#
# One row per diagnostic, one column per normaliser: the mean over the 8 windows $\pm$ the half-width of its
# 95 % t interval. The slope is the log-log slope of the median head's largest weight against $L$ ($-1$ is
# $1/L$); the other rows are read at $L = 256$: the mean row sum, Algorithm 3's critical $N/L$ under the book's
# reading $E$ and under $E_{\text{full}}$ (the Kolmogorov–Smirnov decision of {doc}`33_alternative_normalizers`
# within each window), the mean $N_s/N$ at $N = 5$ as Algorithm 4 counts it and with the zero-weight tokens
# left out (as in {doc}`33_alternative_normalizers`), the mean Jacobian spectral norm at $T = 1$, and the sink
# rate over the 36 heads of the 4 layers.

# %%
values = show.window_values(mod, grids.fixed_N)
tidy, table = show.interval_table(values)
table

# %%
ci = tidy.set_index(["normalizer", "diagnostic"])
print("windows behind each interval:", sorted(set(tidy.windows)))

# %% [markdown]
# ## The sink rate on both offline models and their controls
#
# Gu et al.'s sink rate over every layer and head of the models of {doc}`34_several_models` and their controls,
# under each normaliser applied to the same logits (`softmax` is the model's own weights): the measurement that the
# softpick and sink papers report, here on models trained with softmax. **An illustration:** each run's first
# window only, with no interval over passages (the diagnostics above carry intervals over 8 windows); the
# sentences below that read it describe that window.

# %%
sink = several_models.results("reduced")  # read back from results/, no model loaded
recent = grids.normalizer_names()  # softmax and the later family
rates = several_models.report.sink_rate_table(sink.manifest)[recent]
trained = several_models.report.trained_labels(sink.manifest)
rates.round(2)

# %% [markdown]
# ## Trained on the selection task
#
# Post hoc, a map meets logits that were learned for softmax. To see each map learn its own, the small attention
# model of {doc}`32_training_low_temperature` is trained with it on the same selection task, at $T = 1$, over
# the same grid of marked fractions $N/L$ ($L = 128$), with the same 5 seeds and tasks as softmax. The table
# decides whether each trains as well as softmax: each seed's mean relative test error over the grid minus
# softmax's on the same seed, its mean with the 95 % t interval over the 5 seeds, against the band
# $\pm 0.05$ ("reproduced": it matches softmax).

# %% mystnb={"image": {"alt": "Relative test error against the marked fraction N/L for softmax and the four later normalisers trained on the selection task"}}
train = training.results(training.get_preset(preset)).final
frac = training.report.fraction_runs(train, recent=True)
frac = frac[frac.normalizer.isin(recent)]
fig = training.report.matching_figure(frac)
plotting.finish(fig, "36_training")

# %% [markdown]
# *Figure: the relative test error (test error over that of the all-token mean; 0 is the oracle) against $N/L$,
# median over 5 seeds with their range shaded.*

# %%
matches = training.report.matching_verdicts(frac)
matches.round(3)

# %% [markdown]
# *Difference*: the mean over seeds of each seed's error minus softmax's, with its interval (*lo*, *hi*); the
# N/L where the mean difference is largest, and that difference.
#
# ## The critical scaling
#
# Softmax of $\gamma \log n \cdot l$ sharpens a row as it grows. For one logit ahead of the rest by $\Delta$,
# the largest weight is $1/(1 + (n-1)\, n^{-\gamma\Delta})$: it vanishes like $n^{\gamma\Delta - 1}$ while
# $\gamma < 1/\Delta$ and tends to 1 above. On the model's logits there is no single $\Delta$, so the book
# reads the transition off the data: for each $\gamma$ of a grid of 17 from 0.03 to 3, the slope against $L$
# of the median head's largest weight, and the *critical* $\gamma$ where that slope first reaches $-0.1$ (the
# threshold {doc}`33_alternative_normalizers` holds Scalable-Softmax to), interpolated in $\log\gamma$. This
# order parameter is the book's reading of the critical scaling, not a formula of arXiv:2510.05554.

# %% mystnb={"image": {"alt": "Slope of the largest weight against L as gamma grows, one line per window, crossing -0.1 near gamma = 0.1; and the largest weight at L = 256 rising with gamma"}}
fig = show.gamma_figure(mod.gamma)
plotting.finish(fig, "36_gamma")
gammas = show.critical_gammas(mod.gamma)
gamma_ci = t_interval(gammas.to_numpy())
print(f"critical gamma: {gamma_ci.value:.3f} [{gamma_ci.lo:.3f}, {gamma_ci.hi:.3f}] "
      f"(95 % t over {gamma_ci.units} windows)")

# %% [markdown]
# *Figure: left, the slope of the median head's largest weight against $L$ under softmax$(\gamma \log L \cdot
# l)$, one line per window, with $-0.1$ dotted and each window's critical $\gamma$ marked; right, the largest
# weight at $L = 256$ (median head, median over windows).*
#
# ## What the numbers say
#
# Each sentence below is checked on the numbers above when the page runs (the check is left off the rendered
# page): for the `reduced` preset and the model and text that build this book each must hold; on other runs the
# check prints those that do not.

# %% tags=["remove-cell"]
def lo(name, diagnostic):
    return ci.loc[(name, diagnostic), "lo"]


def hi(name, diagnostic):
    return ci.loc[(name, diagnostic), "hi"]


def mean(name, diagnostic):
    return ci.loc[(name, diagnostic), "value"]


smol, others = trained[0], trained[1:]  # SmolLM2 first, then Gemma


claims = {
    "log-length's largest weight does not vanish (slope above -0.1)":
        lo("log-length", "max-weight slope") > -0.1,
    "softmax's largest weight falls, slowly (slope in (-0.5, 0))":
        -0.5 < lo("softmax", "max-weight slope")
        and hi("softmax", "max-weight slope") < 0,
    "sigmoid's and softpick's largest weights fall faster than softmax's":
        max(hi("sigmoid", "max-weight slope"), hi("softpick", "max-weight slope"))
        < lo("softmax", "max-weight slope"),
    "sigmoid's rows sum to more than 2 on these logits": lo("sigmoid", "row sum") > 2,
    "softpick's rows sum to less than 0.75": hi("softpick", "row sum") < 0.75,
    "the sink logit 0 keeps more than 95 % of each row":
        lo("softmax-with-sink", "row sum") > 0.95,
    "no variant removes the sink post hoc (every sink rate above 0.25)":
        (tidy[tidy.diagnostic == "sink rate"].lo > 0.25).all(),
    "on both trained models no variant brings the sink rate below half of softmax's":
        (rates.loc[trained].drop(columns="softmax").ge(
            0.5 * rates.loc[trained, "softmax"], axis=0)).all().all(),
    "sigmoid raises the sink rate above softmax's":
        lo("sigmoid", "sink rate") > hi("softmax", "sink rate"),
    "softpick separates more of the selected tokens than softmax":
        lo("softpick", "N_s/N") > hi("softmax", "N_s/N"),
    "without its zeros, less so, but still more than softmax":
        mean("softpick", "N_s/N, weight > 0") < mean("softpick", "N_s/N")
        and lo("softpick", "N_s/N, weight > 0") > hi("softmax", "N_s/N"),
    "softpick lowers SmolLM2's sink rate, not Gemma's; sigmoid raises both": bool(
        (rates.loc[trained, "sigmoid"] > rates.loc[trained, "softmax"]).all()
        and rates.loc[smol, "softpick"] < rates.loc[smol, "softmax"] - 0.03
        and (rates.loc[others, "softpick"] >= rates.loc[others, "softmax"] - 0.02).all()
    ),
    "under E_full the critical N/L is below 0.05 for every normaliser":
        (tidy[tidy.diagnostic == "critical N/L (E_full)"].hi < 0.05).all(),
    "the sink logit and log-length train as well as softmax":
        (matches.loc[["softmax-with-sink", "log-length"], "verdict"]
         == "reproduced").all(),
    "sigmoid trains a little worse than softmax, by less than 0.1":
        matches.loc["sigmoid", "lo"] > 0 and matches.loc["sigmoid", "hi"] < 0.1,
    "softpick does not match softmax":
        matches.loc["softpick", "verdict"] == "not reproduced",
    "from N/L = 0.12 on softpick does worse than the all-token mean":
        (frac[(frac.normalizer == "softpick") & (frac.fraction > 0.1)]
         .groupby("fraction").rel_error.mean() > 0.9).all(),
    "the critical gamma lies between 0.05 and 0.2":
        0.05 < gamma_ci.lo and gamma_ci.hi < 0.2,
}
model_id = model.provenance.as_dict().get("model_id")
this_run = (model_id, text.provenance.name, preset)
_ = sentences.assert_sentences(
    claims, described=sentences.describes(this_run, {"preset": "reduced"}),
    about="the reduced preset on the model and text that build this book")

# %% [markdown]
# - **Vanishing attention.** Log-length scaling is the one variant whose largest weight does not fall with the
#   length on the model's logits: beyond $n_0 = 32$ it multiplies the logits by $\log n / \log 32$, enough to
#   hold the top weight. Softmax's own falls, but slowly (the model's heads were trained to concentrate).
#   Sigmoid attention and softpick make it fall *faster*: sigmoid because, with the bias $-\log n$, every weight
#   is about $e^{l_i}/n$ (Lemma 1's $\Theta(1/n)$ without a normalisation), softpick because a longer row has
#   more negative logits in its denominator.
# - **Rows that do not sum to one.** On logits learned for softmax, sigmoid's rows sum to several units, and
#   softpick hands about half of every row to no token, while a sink logit of 0 takes only about 2 per cent: a
#   fixed sink is small against rows of hundreds of tokens. Swapped in afterwards, sigmoid attention is far
#   from softmax; trained with its own bias it comes close (below).
# - **The sink.** None of the four removes the sink from a model trained with softmax: softpick lowers the
#   sink rate a little on SmolLM2 and not on Gemma, the sink logit not at all, and sigmoid raises it on both:
#   its weights are not shared out, so the sink token's large logit alone gives it a weight near 1. Softpick's 0 % and the learned sink's fall from 65 % to 3 % are claims about
#   models *trained* that way, which this page cannot reproduce; what it shows is that neither map, applied to a
#   softmax model, does it by itself — the sink is in the logits ({doc}`34_several_models`).
# - **Separability.** Softpick separates more of the selected tokens than softmax, like the sparse maps of
#   {doc}`33_alternative_normalizers`, and for part of the same reason: its exact zeros all sit at distance
#   $\lVert s \rVert$ from the context vector. Left out of the comparison, they take part of the advantage
#   with them, and what remains is still above softmax's. Under the reading $E_{\text{full}}$ the critical $N$ is the
#   first of the grid for every normaliser, as for softmax in {doc}`23_critical_n`: that reading's expectation
#   hardly depends on $N$ whatever the map.
# - **Training.** Trained with its own map on the selection task, the sink logit learns exactly what softmax
#   learns (a learned query makes the logits large against a fixed sink of 0), and log-length scaling matches
#   softmax too. Sigmoid attention comes close but not all the way: its error is above softmax's by a few
#   hundredths of the baseline, an interval that straddles the band's edge at 5 seeds. Softpick fails once
#   more than a few per cent of the tokens are marked — from $N/L = 0.12$ on its error is above that of the
#   all-token mean. A likely reason, as for the sparse maps of {doc}`32_training_low_temperature`: a token
#   whose logit is at most 0 has weight exactly 0, and its logit's only gradient goes through the denominator,
#   which scales every other weight alike instead of pulling that token in (the book has not isolated this).
# - **The critical scaling.** The sweep over $\gamma$ finds a transition on this model's logits: below a
#   critical $\gamma$ of about 0.1 the largest weight still falls with $L$, above it the weight holds. Read
#   through the one-logit formula ($\gamma^* \approx 0.9/\Delta$), a critical $\gamma$ near 0.1 corresponds
#   to a gap of about 9 between a head's top logit and the rest: how sharply these heads were trained to
#   select.

# %% [markdown]
# ## Execution time
#
# Reading the stored diagnostics on the machine that built this page, and computing them (once, by
# `make results`).

# %%
times.table()
