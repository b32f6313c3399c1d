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
# # Beyond 1,024 tokens: the limits at long contexts
#
# **Data:** both offline models, SmolLM2-135M-Instruct (a context of 8,192 tokens) and Gemma-3-270M (32,768
# tokens; 15 of its 18 layers attend through a sliding window of 512 tokens), on the text named below, with the
# long-context study's `reduced` preset: 8 windows of 8,192 tokens per model, spread evenly over the text (their
# first tokens are printed below), each read at $L = 1024, 2048, 4096, 8192$ on 32 query rows sampled per length
# (16 for Algorithm 5 and for the other normalisers), every layer and every head. The `full` preset (each model's
# whole context, two windows, 128 rows) is one command away, at the end of this page.
#
# The paper's message is about long contexts: softmax weights vanish like $1/L$, so "long-context transformers"
# need another normaliser {cite}`mudarisov2025limitations`. Yet its experiments, and the book's chapters 21–25,
# stop at GPT-2's 1,024 tokens. Models that people use today read eight to thirty-two times more. This chapter
# measures the paper's quantities where those models live: does Lemma 1's $\Theta(1/L)$ hold in a trained
# long-context model, or does the model's scale of logits grow with position? Does the critical fraction
# $N/L$ stay put? And Gemma ships a remedy of its own: a 512-token window is a length-aware normaliser of a
# kind, since its weights cannot fall below $1/512$ however long the context.

# %%
import numpy as np
import pandas as pd
from IPython.display import Markdown

import attnlimits as al
from attnlimits.experiments import paper_claims
from attnlimits.infra import plotting, sentences
from attnlimits.studies import long_context

plotting.set_theme()
pd.set_option("display.precision", 3)
report = long_context.report
# computed once by `make results` (long_context.book_results), shipped in results/
# window by window: each model's run, and why each other model did not run
al.studies.restore()
results, not_run = long_context.book_results("reduced")
for res in results:
    print(report.summary(res))
for why in not_run:
    print("not run:", why)
text = al.texts.load()
labels = [res.label for res in results]
described = text.provenance.name == "pydoc-topics" and len(results) == 2

# %% [markdown]
# ## A capture that scales
#
# The book's other chapters capture a window with the model's eager attention, which forms every layer's
# $(H, L, L)$ weights. At 1,024 tokens that is megabytes; at 8,192 tokens it is the figure below, per window;
# at 32,768 tokens sixteen times more. Here every attention layer records its queries (after the rotary position
# embedding), its keys and values, and the window its mask applies, and then computes its output with the model's
# own SDPA attention: on a sliding-window layer in blocks of 1,024 query rows, each reading only the keys its
# rows can see. The weights of a query row are recomputed from $q$ and $k$ only when a statistic asks for that
# row, one layer at a time: memory grows like $L$, and the work like the number of rows read times $L$.
#
# Is the recomputation the model's own attention? The table compares it with the eager capture on the first
# 1,024 tokens, per kind of layer: the largest difference of any weight, and of the logits and values relative to
# their largest magnitude. The two runs agree to float32 rounding (the SDPA kernel sums in another order, and the
# layers pass those last bits on), and every mask and window is the same.

# %%
by_model = {r.label: r.exactness.set_index("layer type") for r in results}
exactness = pd.concat(by_model, names=["model"])
cost = report.cost_table(results, length=8192)
exactness

# %% tags=["remove-cell"]
# on every run: the recomputation is the model's own attention, in bounded memory
assert exactness["same mask and window"].all()
assert (exactness["weights (max abs diff)"] < 1e-4).all()
# a process's peak also counts the studies it ran before: check the run's own
own = cost[cost["peak of"] == "the run"]
assert (own["peak memory (GB)"] < 8).all()

# %%
cost

# %% [markdown]
# ## A sample of query rows
#
# Every statistic of the paper is a per-head mean over a window's query rows. At length $L$ the study draws
# 32 rows: one uniformly in each of 32 equal blocks of the positions $0..L-1$ (a stratified sample, seeded).
# A head's value is the mean over the sampled rows that count (those that drop a token, as in chapters 22–25),
# each weighted by its block's size. With as many rows as tokens the study reads every row and its values equal
# those of the experiments' own tables on the same capture, to the last bit (a test of the library checks it).
#
# The windows, passages of the text, are the units every interval resamples, as in the Experiments chapters:
# each window's heads are summarised first (its median head, its 95th percentile, its largest head), then each
# window's own slope or level, then the median over the 8 windows with its 95 % order-statistic interval, which
# at 8 windows runs from the smallest to the largest window (it covers at least 95 % whatever the passages do:
# {doc}`31_reproducibility_report` measures it). Each window draws its own rows, so the row sample's error is inside that
# interval too. The intervals generalise over passages of one text read by one model, not over texts or models.
# Every verdict is also decided again with each window left out in turn; one that a single window changes reads
# *hinges on one passage*, names the window, and is not counted as decided.
#
# ## Lemma 1 at long context
#
# Lemma 1 says that when the logits are bounded, every weight is $\Theta(1/L)$: then $l$ times the largest weight
# of a row with $l$ tokens stays put as $L$ grows. The left panel shows that quantity for the tokens other than
# token 0 (the largest of them, renormalised without token 0), the middle one the weight of token 0 itself, the
# attention sink of chapter 25, and the right one the largest weight of all.

# %% mystnb={"image": {"alt": "Three log-log panels against L from 1,024 to 8,192 tokens, one line per model and kind of layer with a shaded 95 % band: l times the largest non-sink weight rises with L on SmolLM2 and on Gemma's full-attention layers and stays nearly flat on Gemma's sliding-window layers; the attention-sink weight stays near a constant on every line; the largest weight stays between about 0.25 and 0.5"}}
fig = report.figure_weights(results)
plotting.finish(fig, "35-weights")

# %% [markdown]
# Lemma 1's conclusion does not hold at these lengths. On SmolLM2, and on Gemma's three full-attention layers,
# $l$ times the largest non-sink weight grows almost like $L$ (a log-log slope near 0.85): that weight falls only
# slightly from 1,024 to 8,192 tokens instead of by a factor of eight, so the model's logits spread further apart
# as the context grows. And the sink keeps its weight: the median head puts about a quarter of a row's mass, or
# more, on token 0 (on average over its rows) at every length, where bounded logits would make it vanish like
# $1/L$. Lemma 1 is proved ({doc}`12_vanishing_attention`), so this is not a counterexample to it: its premise,
# logits bounded independently of $L$, is not met by these models (its constant $e^{2B}$ grows with the logits'
# bound $B$, and a trained model's $B$ grows with the context). The verdict says so: *premise not met*, not
# *not reproduced*. These models are far from the regime where the lemma's $1/L$ bites, because they learned
# logits that spread further as the context grows.
#
# ## Sliding windows: a length-aware normaliser inside a shipped model
#
# Gemma's fifteen sliding-window layers attend to at most 512 tokens, so their weights cannot fall below
# $1/512$ at any length: a window is the crudest length-aware normaliser, and Gemma ships it. The dashed lines
# show it doing what the paper asks of a remedy: $l$ times the largest weight hardly moves on those layers,
# because $l$ stops at 512. The price is the one the paper's Theorem 1 names from the other side: a token more
# than 512 positions back is invisible, not merely down-weighted, and the three full-attention layers carry the
# whole long-range load. On them every trend of this chapter looks like SmolLM2's. The verdicts below read trends
# in $L$ on full-attention layers only: on a window layer they hold or fail by construction. (The attention sink
# is shown in the figures and the main table but is no claim of the paper: the paper never says that the sink
# vanishes, only that bounded logits make every weight vanish.)

# %%
verdicts = report.claims_table(results)
lemma = verdicts[verdicts.key.str.startswith("lemma1")]
short = ("model", "paper", "measured", "verdict")
Markdown(paper_claims.markdown(lemma, columns=short))

# %% [markdown]
# ## Distances against L
#
# Chapter 22's Figure 2a, to 8,192 tokens: the true distance $\tilde d$ of the top $N = 5$ and the two readings of
# the random-selection expectation, the book's reconstruction $E$ of Eq. (10) and $E_\text{full}$, the same with
# the inner factor $N/(\ell - 1)$ replaced by 1 (the reading that chapter 22 found to reproduce the paper's Figure
# 2, a hypothesis about what the paper computed, not its formula).

# %% mystnb={"image": {"alt": "Three log-log panels against L, one line per model and kind of layer: d~ at N = 5 grows about linearly with L on SmolLM2 and on Gemma's full-attention layers and slowly on its sliding-window layers; the book's reconstruction E stays nearly flat; E_full grows like d~"}}
fig = report.figure_distance(results)
plotting.finish(fig, "35-distance")

# %% [markdown]
# On SmolLM2 $\tilde d$ grows like $L$ up to 8,192 tokens, as in the paper's Figure 2a at 1,024, and a little
# more slowly on Gemma's full-attention layers (a log-log slope near 0.85 in the median window; one window of
# the 8 grows a little more slowly than the rule's band allows, and without it the rest lie inside, so that
# verdict *hinges on one passage*);
# $E_\text{full}$ grows alongside, while the book's reconstruction $E$ barely moves. On Gemma's sliding-window
# layers $\tilde d$ grows far more slowly: beyond 512 tokens a row's token count stops growing.
#
# ## The critical N
#
# Algorithm 3 at each length, on a grid of $N$ (five geometric values up to $L/8$ and the fractions 0.5, 0.7,
# 0.8, 0.9 and 0.95 of $L$), run on each window's heads alone: the first $N$ at which a two-sample KS test at
# level 0.05 cannot tell the heads' mean $\tilde d$ from their mean expectation. A grid brackets the critical
# $N$ between two of its points, where chapter 23 searched it exactly. The points are the median over windows of
# each window's critical $N/L$, the bars its 95 % interval over windows; a window that reaches no $N$ of the
# grid at a length is left out of that length's median, and the verdict says so.

# %% mystnb={"image": {"alt": "Two log-log panels of the critical N over L against L, for d~ against E and against E_full, one series per model and kind of layer with 95 % interval bars"}}
fig = report.figure_critical(results)
plotting.finish(fig, "35-critical")

# %% [markdown]
# Against $E$ the critical fraction stays where chapter 23 found it, high up the grid, at every length: flat in
# $L$ on SmolLM2 and on Gemma's full-attention layers alike, reproduced on both. Against $E_\text{full}$ the
# critical $N$ stays at a few dozen tokens on SmolLM2, so its fraction falls roughly like $1/L$ (a log-log slope
# near $-0.9$): not reproduced, the fraction does not stay put. On Gemma's full-attention layers, where the test
# compares only twelve heads of a window, the windows disagree and the rule cannot decide. (Gemma's
# sliding-window layers have no row with more than 512 tokens, so against $E$ they reach no $N$ of the grid.)

# %%
critical = verdicts[verdicts.key.str.startswith("critical")]
Markdown(paper_claims.markdown(critical, columns=short))

# %% [markdown]
# ## The separable fraction and the gradient
#
# Figure 3's $N_s/N$ on the value vectors at every length (each window's median head), and Figure 4's $g(T)$ at
# every length (each window's largest head), both the median over the windows.

# %% mystnb={"image": {"alt": "For each model two panels: the median N_s/N against N at L = 1,024 to 8,192 with the paper's 70 to 85 % band shaded, and the largest g over heads against the temperature T at each L on log-log axes"}}
fig = report.figure_plateau_g(results)
plotting.finish(fig, "35-plateau-g")

# %% [markdown]
# The plateau hardly moves with $L$. On SmolLM2 it sits near a half, below the paper's 70–85 %, as chapter 24
# found at 1,024 tokens; on Gemma it sits at the bottom of the paper's band, lowered only on its full-attention
# layers as $L$ grows (there it leaves the band). And the largest head's $g$ rises as the temperature falls at
# every length, though less steeply than $1/T$ between 0.01 and 0.001. The rule for Figure 4 reads, as in
# {doc}`25_gradient_in_the_model`, the 95th percentile over a window's heads rather than the largest head (a
# maximum has no valid interval): below $T = 0.01$ that percentile grows far more slowly than $1/T$ in every
# window, each window's log-log slope above $-0.6$, far from $-1$. On both models the verdict is *not
# reproduced*. Gemma's windows disagree widely (their slopes run from about $-0.6$ to $1.1$), but none comes near
# $-1$: read as a mean over windows with a t interval, as the book did until 2026-12-06, that spread made the
# verdict hinge on one passage; the median's interval holds the windows' own values and decides it.
#
# ## Other normalisers on the same logits
#
# Chapter 33's normalisers, applied post hoc to the model's own logits of the sampled rows: what the largest
# weight would be at these lengths had the model used Scalable-Softmax, sparsemax, 1.5-entmax or adaptive
# temperature instead (the model was trained with softmax, so this is a what-if on its logits, not another
# model). Gemma's panel pools all its layers; the table gives each line's log-log slope against $L$ with its
# interval, and Gemma's kinds of layer apart.
#
# On the same logits no normaliser changes the picture: under all five, $l$ times the largest weight grows like
# $L$ on SmolLM2 and on Gemma's full-attention layers, because the largest weight is the sink's, which these
# logits single out under any normaliser (Scalable-Softmax only sharpens it further). A normaliser fixes what a
# model learns with it, not what it is handed by a model trained with softmax.

# %% mystnb={"image": {"alt": "For each model, the median l times the largest weight against L under softmax and the four other normalisers of chapter 33 on the same logits, log-log, with 95 % bands"}}
fig = report.figure_normalizers(results)
plotting.finish(fig, "35-normalizers")
names = al.normalizers.names("paper")  # the study reads the paper's family
slopes = report.slope_table(results, "max_weight_x_len", normalizers=names)
slopes[slopes.group != "sliding"].round(2)

# %% [markdown]
# ## The chapter's table
#
# Per model, kind of layer and length, each the median over the 8 windows: each window's median head of $l$ times
# the largest non-sink weight, of the sink weight, of $\tilde d$ and $E$ at $N = 5$, of $N_s/N$ at $N = 64$, its
# largest head's $g$ at the smallest $T$, and the median critical $N/L$ under both readings with its interval over
# windows.

# %%
main = report.main_table(results)
main

# %% [markdown]
# ## Verdicts
#
# Every claim of this page, decided by a rule on an interval over the windows (the rule column says which), with
# the range of its number when any one window is left out; the sentences above are asserted against these
# verdicts on the run that builds the book.

# %%
Markdown(paper_claims.markdown(verdicts, columns=(*short, "rule")))

# %%
verdicts[["model", "key", "verdict_all", "loo_lo", "loo_hi", "hinges_on"]].round(3)

# %% tags=["remove-cell"]
by_key = {(r.model, r.key): r.verdict for r in verdicts.itertuples()}
smol, gemma = (labels + [None, None])[:2]
NOT, OK = paper_claims.NOT, paper_claims.REPRODUCED
expected = {  # (model, claim): the verdict the sentences of this page state
    (smol, "lemma1-full"): "premise not met",
    (gemma, "lemma1-full"): "premise not met",
    (smol, "distance-full"): OK,
    (gemma, "distance-full"): paper_claims.HINGES,
    (smol, "critical-E-full"): OK,
    (gemma, "critical-E-full"): OK,
    (smol, "critical-E_full-full"): NOT,
    (gemma, "critical-E_full-full"): paper_claims.INCONCLUSIVE,
    (smol, "plateau-full"): NOT,
    (gemma, "plateau-all"): OK,
    (gemma, "plateau-full"): NOT,
    (smol, "gradient"): NOT,
    (gemma, "gradient"): NOT,
}
statements = {
    f"{m}: {k} is {v!r}": by_key.get((m, k)) == v for (m, k), v in expected.items()
}
sink = main.groupby(["model", "layers"])["sink weight"].min()


def largest_g(T):
    trends = [report.trend(r, "g", T=T, stat="max").value for r in results]
    return np.concatenate(trends)


full = slopes[slopes.group == "full"].slope
statements |= {
    "8 windows per model": all(len(r.windows) == 8 for r in results),
    "the median sink weight is at least 0.2 at every length": bool((sink >= 0.2).all()),
    "Lemma 1's slope near 0.85 (0.8 to 0.9) on both models' full layers": bool(
        verdicts[verdicts.key == "lemma1-full"].value.between(0.8, 0.9).all()
    ),
    "Gemma's full layers: d~ grows more slowly than SmolLM2's": bool(
        gemma is not None
        and verdicts.query("key == 'distance-full'").set_index("model").value[gemma]
        < verdicts.query("key == 'distance-full'").set_index("model").value[smol]
    ),
    "E_full: SmolLM2's critical fraction falls (slope below -0.5)": bool(
        verdicts.query("key == 'critical-E_full-full'").set_index("model").value[smol]
        < -0.5
    ),
    "g at T = 0.001 exceeds g at T = 1 at every length": bool(
        (largest_g(1e-3) > largest_g(1.0)).all()
    ),
    "below T = 0.01 every window's 95th percentile of g has a slope above -0.6": bool(
        (verdicts[verdicts.key == "gradient"].value_lo > -0.6).all()
    ),
    "every normaliser: l x the largest weight grows like L": bool(
        full.between(0.8, 1.2).all()
    ),
}
about = "both offline models on pydoc-topics"
_ = sentences.assert_sentences(statements, described=described, about=about)

# %% [markdown]
# ## Longer runs
#
# The book's build reads 8 windows of 8,192 tokens per model. The text holds a few windows of Gemma's whole
# context (the count below, for each model's tokenizer); `make long` runs the `full` preset on both models, each
# up to its whole context (SmolLM2 to 8,192 tokens, Gemma to 32,768) on two windows and 128 rows per length, one
# window in memory at a time: about 40 minutes on two cores (each run records its times and its peak memory in
# its provenance, as the table at the top of this page shows for the book's run), and writes the same tables into
# the results cache, where this page reads them with `long_context.book_results("full")`. On your own model and lengths, the command line runs the same study
# and writes its tables, verdicts and figures into a folder:
#
# ```bash
# attnlimits analyze --model gemma3-270m --lengths 1024,2048,4096,8192,16384,32768 --rows 128 --out gemma-long
# ```

# %%
windows = {r.label: r.text_windows(32768) for r in results}
pd.Series(windows, name="windows of 32,768 tokens in the text")
