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
# # Training at low temperature and the selection limit
#
# **Data:** a synthetic selection task, seeded, trained on the CPU; no pretrained model. **Preset:** the
# `reduced` preset runs so that the chapter fits in CI: 3 seeds, 250 Adam steps of 32 sequences, L = 128
# for the temperature and N/L grids. The `full` preset (5 seeds, 1500 steps of 64 sequences, L = 256, 11
# fractions N/L) is one parameter away: set `ATTNLIMITS_PRESET=full` or pass `preset="full"` to papermill.
#
# The paper {cite}`mudarisov2025limitations` draws two practical rules from its bounds without training anything:
# gradient sensitivity "presents challenges during training, especially at low temperature", and the active set
# should stay below about 6 % of the context. This chapter trains a small attention model on a task whose
# difficulty we set — how many tokens must be selected, out of how many, at which temperature — and checks both
# rules, for softmax and for the alternatives the paper recommends.

# %%
import os

preset = os.environ.get("ATTNLIMITS_PRESET", "reduced")

# %%
import time

from attnlimits.experiments import paper_claims
from attnlimits.infra import plotting
from attnlimits.studies import training

plotting.set_theme()
p = training.get_preset(preset)
print(f"preset {p.name}: {p.notes}")
start = time.perf_counter()
out = training.results(p)  # computed once, then read from results/training/
elapsed = time.perf_counter() - start
history, final = out.history, out.final
temp, temp_hist = training.report.temperature_runs(out)
print(f"{len(final)} runs, {len(history):,} logged steps; read in {elapsed:.1f} s")
trained = final.groupby(["experiment", "normalizer", "L"]).seconds.first().sum()
print(f"training time of the sweep (summed over groups): {trained:.0f} s")

# %% [markdown]
# ## The task and the model
#
# A sequence holds $L$ tokens; $N$ of them, at random positions, are *marked*. Token $i$ carries a value vector
# $v_i \sim \mathcal N(0, I_4)$, a mark feature $m_i \in \{0, 1\}$ and three distractor features; the target is
# the mean of the marked tokens' values,
#
# $$
# y = \frac1N \sum_{i:\, m_i = 1} v_i .
# $$
#
# The model is one attention layer with a learned query $q$, keys $W_k x_i$ and values $W_v x_i$:
#
# $$
# \hat y = \sum_i \alpha_i W_v x_i, \qquad \alpha = \operatorname{normaliser}\big(q \cdot W_k x_i / T\big)_i ,
# $$
#
# with each normaliser of {doc}`11_attention_as_selection`: softmax, sparsemax, 1.5-entmax, Scalable-Softmax and
# adaptive temperature. It can solve the task exactly only by putting all its weight, evenly, on the marked
# tokens: that is the selection the paper studies, with $N$ and $L$ set by hand.
#
# Two baselines bracket every error. Predicting the mean of *all* tokens' values (what uniform attention
# returns; the trained analogue of the random-selection expectation $E$ of {doc}`13_distance_collapse`) has
# error $\approx (1/N - 1/L)$ per entry, which falls as $N/L$ grows — the target itself drifts toward the
# all-token mean. The oracle that attends uniformly to the marked tokens has error 0. So every error below is
# reported as **relative error** = test error / error of the all-token mean: 1 means "learned nothing", above 1
# worse than that, 0 the oracle.
#
# Every seed fixes the initial parameters, the training pool and the test set; they do not depend on the
# normaliser or $T$, so the runs differ only by what is compared. Optimiser: Adam, learning rate 0.03, no
# gradient clipping (we want to see the spikes). A run *reaches the target* when its training loss falls
# below 10 % of the baseline; it *diverges* if a logit or a parameter stops being finite.

# %%
runs = final.groupby("experiment").size()
runs.rename("runs").to_frame().T

# %% [markdown]
# ## Temperature
#
# The first grid trains every normaliser at $T \in \{0.01, 0.03, 0.1, 0.3, 1, 3, 10\}$ with $N/L = 1/16$.

# %% mystnb={"image": {"alt": "Five panels of training loss against step, one line per temperature; the lowest temperatures stay flat"}}
fig = training.report.loss_curves_figure(temp, temp_hist)
plotting.finish(fig, "32_loss_curves")

# %% [markdown]
# *Figure: training loss curves per temperature (median over seeds), one panel per normaliser, relative to the
# error of predicting the mean of all tokens. Dark curves are low temperatures.*

# %% mystnb={"image": {"alt": "Relative test error against temperature for the five normalisers, near 1 at low temperature"}}
fig = training.report.error_vs_temperature_figure(temp)
plotting.finish(fig, "32_error_vs_T")

# %% [markdown]
# *Figure: final test error relative to the all-token-mean baseline (dashed line at 1) against $T$, median over
# seeds with the range of the seeds shaded. The oracle is at 0.*

# %%
training.report.reached_table(temp)

# %% [markdown]
# The table counts, per normaliser and temperature, the seeds that reach the target loss. Next, the gradients
# of the attention parameters ($q$ and $W_k$) at every step:

# %% mystnb={"image": {"alt": "Box plots of per-step gradient norms by temperature and normaliser on a log scale"}}
fig = training.report.gradient_box_figure(temp_hist)
plotting.finish(fig, "32_grad_by_T")

# %% [markdown]
# *Figure: distribution over all steps and seeds of the gradient norm of the attention parameters, per
# temperature and normaliser (log scale; zero gradients drawn at $10^{-8}$).*

# %%
stats = training.report.gradient_table(temp, temp_hist)
stats.loc["softmax"].style.format("{:.3g}")

# %% [markdown]
# `grad_spike` is the largest ratio, over the seeds, of a run's largest gradient norm to its median one;
# `steps_to_target` the median, over the seeds that reach it, of the first step at the target loss.

# %% [markdown]
# ## How many tokens to select: N / L and L
#
# The second grid keeps $T = 1$ and varies the fraction of marked tokens $N/L$ from 1 % to 50 %; the third keeps
# $N/L = 1/16$ and varies $L \in \{64, 256, 1024\}$. If the paper's limit bit in training, the error would rise
# once $N$ passes about $0.06\,L$ (the dotted line).

# %% mystnb={"image": {"alt": "Relative test error against N/L and against L for the five normalisers"}}
frac = training.report.fraction_runs(final)
length = training.report.length_runs(final, p)
fig = training.report.error_vs_fraction_figure(frac, length, p)
plotting.finish(fig, "32_error_vs_fraction")

# %% [markdown]
# *Figure: relative test error against the fraction of marked tokens (left, dotted line at the paper's 6 %) and
# against the length at a fixed fraction (right); median over seeds, range shaded.*

# %% mystnb={"image": {"alt": "Violin plots of per-step gradient norms at T = 1, one per normaliser"}}
fig = training.report.gradient_violin_figure(temp, temp_hist)
plotting.finish(fig, "32_grad_by_normalizer")

# %% [markdown]
# *Figure: per-step gradient norms of the attention parameters at $T = 1$, all seeds, per normaliser.*

# %%
training.report.fraction_table(frac).style.format("{:.4f}")

# %% [markdown]
# ## What the runs say
#
# Each sentence below is checked on the numbers above when the page runs (the check is left off the rendered
# page). The sentences describe the `reduced` preset: there each must hold; on another preset the check prints
# those that do not.

# %%
def runs_of(data, name, **where):
    sel = data[data.normalizer == name]
    for col, values in where.items():
        sel = sel[sel[col].isin(values)]
    return sel


soft_low = runs_of(temp, "softmax", T=[0.01, 0.03])
soft_ok = runs_of(temp, "softmax", T=[1.0, 3.0, 10.0])
low_all = temp[temp["T"] <= 0.03]
sparse_frac = runs_of(frac, "sparsemax")
soft_frac = runs_of(frac, "softmax")
print(f"softmax runs at T <= 0.03: {len(soft_low)}, reaching the target: "
      f"{soft_low.steps_to_target.notna().sum()}; diverged in the whole sweep: "
      f"{int(final.diverged.sum())} of {len(final)}")

# %% tags=["remove-cell"]
claims = {
    "no run of any normaliser diverges (NaN or inf)": not final.diverged.any(),
    "at T <= 0.03 no softmax run reaches the target; each stalls above the baseline":
        soft_low.steps_to_target.isna().all() and (soft_low.rel_error > 0.9).all(),
    "at T <= 0.03 no run of any normaliser reaches the target":
        low_all.steps_to_target.isna().all(),
    "at T >= 1 every softmax run reaches the target, relative error < 0.01":
        soft_ok.steps_to_target.notna().all() and (soft_ok.rel_error < 0.01).all(),
    "softmax's largest gradient spike at T <= 0.03 exceeds 10x its largest at T >= 1":
        soft_low.grad_spike.max() > 10 * soft_ok.grad_spike.max(),
    "softmax at T = 1 learns every N/L from 1 % to 50 % (relative error < 0.05)":
        (soft_frac.rel_error < 0.05).all(),
    "softmax at T = 1 learns at every L from 64 to 1024 (N/L = 1/16, error < 0.05)":
        (runs_of(length, "softmax").rel_error < 0.05).all(),
    "sparsemax at T = 1 fails (median relative error > 0.9) for every N/L >= 6 %":
        (sparse_frac[sparse_frac.N / sparse_frac.L >= 0.06]
         .groupby("N").rel_error.median() > 0.9).all(),
    "at T = 0.01 most of sparsemax's steps have an exactly zero gradient":
        stats.loc[("sparsemax", 0.01), "zero-gradient steps"] > 0.5,
    "at T = 10 every sparsemax run reaches the target":
        runs_of(temp, "sparsemax", T=[10.0]).steps_to_target.notna().all(),
}
_ = paper_claims.assert_sentences(
    claims, described=p.name == "reduced", about="the reduced preset"
)

# %% [markdown]
# - **Low temperature stalls training; it does not blow it up.** At $T \le 0.03$ none of the softmax runs (nor
#   any other normaliser's) reaches the target loss, and every softmax run ends with a relative error above
#   0.9, no better than predicting the mean of all tokens; yet no run in the whole sweep diverges. At
#   initialisation the logits divided by a small $T$ are huge, each row is nearly one-hot on a random token, and
#   the gradient is either almost zero (saturated rows) or a rare spike (the largest spikes at low $T$ are more
#   than ten times those at $T \ge 1$; at $T = 0.01$ most of sparsemax's steps have an exactly zero gradient).
#   The paper's warning holds in this sense — low temperature is where training fails — but the failure is a
#   stall, not an explosion.
# - **At $T \ge 1$ softmax learns the selection in every seed.** Adam rescales the steps, so a high temperature
#   only asks for larger weights, which it learns within the budget.
# - **The 6 % rule does not show up in training here.** Softmax at $T = 1$ learns every fraction from 1 % to
#   50 % of the tokens, and every length from 64 to 1024 at $N/L = 1/16$: its error does not rise at
#   $N \approx 0.06\,L$. This task asks for a uniform average of the selected tokens, which softmax represents
#   exactly with two logit levels; the paper's limit is about telling the selected aggregate apart from the
#   rest geometrically, which a trained model of this kind does not need. The data do not support the 6 % rule
#   as a limit on what attention can learn to select.
# - **The sparse normalisers have the opposite problem.** Sparsemax fails at $T = 1$ as soon as $N/L \ge 6\,\%$:
#   a token outside its support gets no gradient at all (exact zeros cut both the weight and its derivative),
#   so a marked token the initial support misses is never pulled in. At $T = 10$, where the initial support is
#   wide, every sparsemax run reaches the target ({doc}`33_alternative_normalizers` sets these numbers beside
#   the paper's diagnostics).

# %% [markdown]
# ## Time
#
# The first cell prints the wall time of the sweep (summed over its groups) when it was computed; the book reads
# it from the cache afterwards. Chapter {doc}`33_alternative_normalizers` closes with the times of both chapters.
