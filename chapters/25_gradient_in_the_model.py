# ---
# jupyter:
#   execution:
#     timeout: 3600
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
#     execution_timeout: 3600
# ---

# %% [markdown]
# # Gradient sensitivity in the model (Algorithm 5)
#
# **Data:** the pretrained model and the text named in the banner below (GPT-2 on *War and Peace* when they can
# be loaded, else the offline fallbacks), the book's `paper` preset: 32 windows of 1,024 tokens spread evenly over
# the whole text, each computed alone and summarised over its heads (shipped with the book under `results/`);
# Algorithm 5 reads the first 256 tokens of each window, every row, every layer and every head. The last section
# also reads a second text, the King James Version, beside the first, at the same preset (shipped with the book
# too).
#
# How much does attention move when its logits move a little, and how does that depend on the temperature? The
# paper's Figure 4 {cite}`mudarisov2025limitations` perturbs the logits of every head of GPT-2 and reports that
# the response follows $1/T$ at low temperature and falls by about two orders of magnitude once $T \ge 1$, drawn
# against its Corollary 3 curve $\min\{1/(4T), \sqrt 2\}$. {doc}`15_gradient_sensitivity` proves that this curve is
# not a bound on the Jacobian's spectral norm (the sharp bound is $1/(2T)$); here is what the model's own logits do.

# %%
import textwrap

import numpy as np
import pandas as pd
from IPython.display import Markdown

from attnlimits.experiments import figures, paper_claims, shipped
from attnlimits.infra import plotting, sentences

plotting.set_theme()
# the model and the text (banner below) and their run at the paper preset, read from
# the results the book ships under results/ (ATTNLIMITS_EXPERIMENTS_PRESET=quick: a
# smoke run, computed here)
model, text, res, _ = shipped.book_run(no_sink=False)

# %% [markdown]
# ## What is measured
#
# For every head $h$ of a window $w$ and every query row $t$ of the window with logits $l_t$ (masked positions
# excluded), a random unit direction $v$ on the row's visible entries and a step $\varepsilon$,
#
# $$
# g_{w,h}(T, \varepsilon) = \operatorname{mean}_t \;
# \frac{\lVert \operatorname{softmax}((l_t + \varepsilon v)/T) - \operatorname{softmax}(l_t / T) \rVert_2}{\varepsilon},
# \qquad
# g(T, \varepsilon) = \operatorname{median}_w \, \max_h \, g_{w,h}(T, \varepsilon).
# $$
#
# The paper's $g$ is the largest head's: it averages each head over all of its rows and takes the maximum over
# the heads. The book reads that maximum per window (a passage of text, the unit every interval resamples): each
# window's largest head, then the median over the windows. It is not the paper's number — in each window the
# largest head may be another one, so it is never below the maximum of the heads' means over all the windows —
# but it is the paper's statistic read where the book's data has it.
#
# A window's maximum rests on a single head of all of its heads, whichever tops the window at that $T$, so the
# curve moves with a head's luck on a few rows. The figure and the table therefore show the paper's $g$ without
# an interval, and Figure 4's claims are decided on a statistic that rests on more heads: each window's 95th
# percentile over its heads, from which each window's own slope and drop, their median over the windows with its
# 95 % order-statistic interval (at least 95 % whatever the passages do: {doc}`31_reproducibility_report`
# measures it). It still reads the most sensitive heads (about one in twenty).
#
# Two choices the paper leaves open, stated here. *Which logits:* the model feeds its softmax
# $l = q \cdot k / \sqrt{d_{\text{head}}}$, so the model's own temperature is $T = 1$ on these logits; the table
# keeps both the model-scaled logits (`logit_scaling = "model"`) and the raw dot products $q \cdot k$ (`"none"`).
# The two are one computation seen at two scales: $g_{\text{raw}}(T, \varepsilon) =
# s\, g_{\text{model}}(sT, s\varepsilon)$ with $s = 1/\sqrt{d_{\text{head}}}$ (the tests check the identity).
# *Which rows:* the first 256 tokens of each window — Algorithm 5 costs a softmax of every row for each of 21
# temperatures and 4 perturbations, and the paper's runtime (1 minute, against 24 for Algorithm 1) points to
# short sequences too. The same directions $v$ serve every $T$ and $\varepsilon$ (seeded), so the curves are
# smooth in $T$.
#
# Since $\lVert J \rVert_2 \le 1/(2T)$ for the softmax Jacobian $J$ and $\lVert v \rVert = 1$, the mean value
# theorem bounds every row's ratio, hence $g$, by $1/(2T)$; and $\lVert \alpha - \alpha' \rVert \le \sqrt 2$ bounds
# it by $\sqrt 2 / \varepsilon$.

# %% mystnb={"image": {"alt": "Log-log plot of the sensitivity g against the temperature T with the model-scaled logits, one colour per epsilon: the paper's g read per window, each window's maximum over its heads, its median over the windows, with markers and no interval; at the smallest epsilon each window's 95th percentile over its heads, its median over the windows, with small squares and its 95 % interval over windows (order statistics) as a band; the paper's printed min{1/(4T), sqrt 2} dashed and the book's 1/(2T) as a thin grey line."}}
fig = figures.gradient_figure(res, "model")
plotting.finish(fig, "25_fig4")

# %% mystnb={"image": {"alt": "Log-log plot of the sensitivity g against the temperature T with the raw q.k logits, one colour per epsilon: the paper's g read per window, each window's maximum over its heads, its median over the windows, with markers and no interval; at the smallest epsilon each window's 95th percentile over its heads, its median over the windows, with small squares and its 95 % interval over windows (order statistics) as a band; the paper's printed min{1/(4T), sqrt 2} dashed and the book's 1/(2T) as a thin grey line."}}
fig = figures.gradient_figure(res, "none")
plotting.finish(fig, "25_fig4_raw")

# %% [markdown]
# The table gives the curves of the first figure: the paper's $g$ read per window at each step $\varepsilon$ (no
# interval), each window's 95th percentile over its heads, its median over the windows with its 95 % interval over
# windows, and, as a labelled alternative that is *not* the paper's statistic, the largest window's maximum: the
# largest $g_{w,h}$ of one head in one window, which the check of the printed curve below reads. That alternative
# lets one passage decide: it is never below the paper's $g$ and grows as more windows are read.

# %%
g = res.gradient
epsilons = sorted(set(g.eps))
curves = {  # the paper's g read per window: each window's max over heads, their median
    (scaling, eps): paper_claims.g_quantile(res, eps, scaling, q=None)["value"]
    for scaling in sorted(set(g.logit_scaling))
    for eps in epsilons
}
q95 = paper_claims.g_quantile(res)  # the smallest eps, the model's logits
largest = res.g().groupby("T")["max"].max()  # the largest window's max over heads
smallest = f"eps = {epsilons[0]:g}"
table = pd.DataFrame({f"paper's g, eps = {e:g}": curves["model", e] for e in epsilons})
table = table.map(lambda v: f"{v:.3g}")
table[f"95th percentile [95 %], {smallest}"] = [
    f"{v:.3g} [{lo:.3g}, {hi:.3g}]"
    for v, lo, hi in q95[["value", "lo", "hi"]].to_numpy()
]
table[f"largest window's max (alternative), {smallest}"] = largest.map("{:.3g}".format)
print(f"95 % intervals: {q95.attrs['stated']}")
table

# %% [markdown]
# ## The slope at low temperature

# %%
def trend(curve):
    """Log-log slopes of a curve in T below T = 0.1 and from T = 1 on, and its drop."""
    low, high = curve[curve.index < 0.1], curve[curve.index >= 1]
    return (paper_claims.loglog_slope(low.index, low.values),
            paper_claims.loglog_slope(high.index, high.values),
            float(curve.max() / high.iloc[0]))


slopes = {key: trend(curve)[:2] for key, curve in curves.items()}
for (scaling, eps), (low_slope, high_slope) in slopes.items():
    print(f"{scaling:>5} logits, eps = {eps:<6g}: paper's g ~ T^{low_slope:.2f} "
          f"for T < 0.1, T^{high_slope:.2f} for T >= 1")
median = paper_claims.g_quantile(res, q=0.5)["value"]  # each window's median head
rows = {
    "a window's max, median (the paper's g)": curves[("model", epsilons[0])],
    "a window's 95th percentile, median": q95["value"],
    "a window's median head, median": median,
    "the largest window's max (alternative)": largest,
}
print(f"{smallest}, model logits; slope for T < 0.1 and drop to T = 1:")
for name, curve in rows.items():
    low, _, drop = trend(curve)
    print(f"  {name:<40} ~ T^{low:.2f}, drop x{drop:.1f}")

# %% [markdown]
# ## The lowest temperatures, window by window
#
# At low temperature a head responds only on rows whose two top logits nearly tie, so a passage's curve there
# depends on how many such rows its heads meet. The windows with the largest 95th percentile over their heads at
# the lowest temperature, with their median and maximum over their heads:

# %%
lowest = res.g().query("T == T.min()").set_index("window")[["q50", "q95", "max"]]
share = lowest["q95"].max() / lowest["q95"].sum()
print(f"T = {g['T'].min():g}, {smallest}, model logits: the first window below holds "
      f"{share:.0%} of the sum over windows of the 95th percentile")
lowest.nlargest(3, "q95")

# %%
first = int(lowest["q95"].idxmax())
start = res.provenance["window_starts"][res.provenance["windows"].index(first)]
print(f"window {first}, from token {start:,} of the text, begins:")
print(textwrap.fill(shipped.passage(model, text, res.preset, first), 88))

# %% [markdown]
# One window stands apart: at the lowest temperature even its median head responds more strongly than the 95th
# percentile of any other window, and it alone holds more than half of the sum over the windows of the 95th
# percentile. A mean over windows would rest there on one passage: until 2026-12-06 the book read the mean, and
# its t interval at the lowest temperatures ran below 0, a value $g$ cannot take, and left both trends of Figure
# 4 hinging on this one window. The median over windows is not moved by one passage, and its interval's ends are
# two windows' own values. The near-ties decide $g$ there down to the arithmetic: one window of the book's run, recomputed with the CPU's AVX2 kernels instead of
# its AVX-512 ones, moved its median head's $g$ at $T \le 0.003$ by 20 % (the tolerance the book's audit allows
# Algorithm 5 between kernel paths is set from it).

# %% [markdown]
# ## Paper reports, we measure
#
# Each row is computed from the tables above by a fixed rule (the `rule` column). The sentences after the table
# describe the model and text that build this book (SmolLM2-135M-Instruct on the Python documentation); a check
# that runs with the page (left off the rendered book) asserts their verdicts for that run, so the book fails to
# build if a number drifts from its sentence. On another model or text the table is that run's, and the check
# prints which verdicts differ from the sentences.

# %%
claims = paper_claims.decided(res, "4")  # decided again with each window left out
Markdown(paper_claims.markdown(claims))

# %% tags=["remove-cell"]
_ = sentences.expect(res, claims, {
    "fig4-slope": "not reproduced",
    "fig4-drop": "not reproduced",
    "fig4-printed-bound": "not reproduced",
})
# the book's sharp bound holds for every head of every window (each window's max)
top = g[g.quantity == "g"]
assert (top["max"] <= 1 / (2 * top["T"]) * (1 + 1e-9)).all()
assert (top["max"] <= np.sqrt(2) / top.eps * (1 + 1e-9)).all()
slope = claims.set_index("key").loc["fig4-slope"]
drop = claims.set_index("key").loc["fig4-drop"]
paper_g = curves[("model", epsilons[0])]
_ = sentences.assert_sentences({
    "Algorithm 5 reads every row": paper_claims.rows_read(res)["gradient"] is None,
    "the paper's g falls about as 1/T from T = 1 on, every step and logit scale": all(
        -1.3 <= high <= -0.9 for _, high in slopes.values()
    ),
    "below T = 0.1 the paper's g grows far more slowly than 1/T (slope > -0.8)": all(
        low > -0.8 for low, _ in slopes.values()
    ),
    "a window's median head's g grows far more slowly than 1/T below T = 0.1": bool(
        trend(median)[0] > -0.6
    ),
    "at the lowest T one window's median head exceeds every other window's q95": bool(
        lowest.loc[first, "q50"] > lowest["q95"].drop(first).max()
    ),
    "that window holds more than half of the windows' sum of the q95": bool(
        share > 0.5
    ),
    "no window left out moves the slope or the drop": bool(
        (claims.set_index("key").hinges_on[["fig4-slope", "fig4-drop"]] == "").all()
    ),
    "the q95's slope interval lies between -0.3 and 0": bool(
        -0.3 < slope.value_lo and slope.value_hi < 0
    ),
    "the q95 drops about tenfold (interval within 5 and 20)": bool(
        5 < drop.value_lo and drop.value_hi < 20
    ),
    "the paper's g read per window, its median, is below the printed curve": bool(
        paper_g.iloc[0] < min(1 / (4 * paper_g.index[0]), np.sqrt(2))
    ),
    "the largest window's max grows faster below T = 0.1 than the paper's g": bool(
        trend(largest)[0] < trend(paper_g)[0]
    ),
}, described=sentences.describes(res))

# %% [markdown]
# - **Not reproduced: the drop by two orders of magnitude.** $g$ falls steeply once $T \ge 1$ — like $1/T$ or
#   slightly faster (the slopes above), since the weights spread and every row responds like the Jacobian
#   $(\operatorname{diag}\alpha - \alpha\alpha^\top)/T$. How far it falls depends on where it starts, and at low
#   temperature that differs from passage to passage: only rows with two nearly tied top logits respond there
#   (up to the $1/(2T)$ of chapter 15), and some passages of the text hold such rows in a head while others hold
#   none. The paper's $g$ drops by the factor printed above; the 95th percentile over a window's heads, on which
#   the rule decides, drops in the median window by about ten times, its 95 % interval over the windows (the
#   table) between $\times 5$ and $\times 20$: far short of $\times 30$ to $\times 300$, whichever window is
#   left out.
# - **Not reproduced: $1/T$ below $T = 0.1$.** The paper's $g$, read per window, grows much more slowly than $1/T$
#   there (slopes above $-0.8$ for every step and both logit scales), and so does a window's median head. So does
#   the 95th percentile on which the rule decides: in the median window it grows as about $T^{-0.16}$, its
#   interval over windows between $-0.3$ and 0, far from $-1$. The one passage of the section above grows faster,
#   but it is one window of 32; read as a mean over windows, it alone widened both intervals until they decided
#   nothing.
# - **Not reproduced: the printed curve.** Some head's $g$ in some window rises far above
#   $\min\{1/(4T), \sqrt 2\}$ at the lowest temperatures (the claims table gives the largest ratio, read from
#   each window's maximum over its heads: a head's mean over one passage's rows, not diluted by the passages where
#   it hardly responds); the paper's $g$ read per window, its median over the windows, stays below it even at the
#   lowest temperature (the figure): the heads that break the curve sit in a few passages. A perturbation that swaps two nearly tied logits moves the weights by up to
#   $\sqrt 2$ for a step $\varepsilon$, far more than $\sqrt 2\,\varepsilon$. This is the numerical face of
#   chapter 15's proof that the curve is not a bound; the book's bound $1/(2T)$ holds for every head of every
#   window, as it must.
# - **The largest head decides nothing alone.** The paper's $g$ is shown beside each verdict, without an
#   interval, because in each window it rests on a single head. The largest window's maximum (the table's last
#   column, its slope and drop printed above) grows faster below $T = 0.1$ than the paper's $g$ read per window:
#   the steepest response belongs to a few passages. It lets one passage of text set the curve; it is not what
#   the paper computes, and it would keep moving as more windows are read.

# %% [markdown]
# ## On a second text
#
# Are these verdicts the Python documentation's? The same model also reads a second text, the King James Version
# of the Bible: narrative English, like the paper's novel, from Debian's package `bible-kjv`. Its run ships with
# the book at the same preset (32 windows of 1,024 tokens spread over the text), so between the two columns only
# the text changes. Each cell is a verdict with its number and the 95 % interval over that run's windows.

# %%
texts_table, same = paper_claims.on_a_second_text(res, ["4"])
Markdown(texts_table)

# %% tags=["remove-cell"]
second, _ = shipped.second_text(res.preset)
if second is not None:
    ours = claims.set_index("key").verdict_all
    theirs = paper_claims.claims(second, "4").set_index("key")
    drop = theirs.loc["fig4-drop"]
    low = second.g().query("T == T.min()")["q95"]
    _ = sentences.assert_sentences({
        "the second text moves no verdict of Figure 4": bool(
            (ours == theirs.verdict).all()
        ),
        "on the King James Bible the slope and the drop are not reproduced": bool(
            theirs.loc["fig4-slope", "verdict"] == theirs.loc["fig4-drop", "verdict"]
            == paper_claims.NOT
        ),
        "there the q95's slope interval lies between -0.5 and 0": bool(
            -0.5 < theirs.loc["fig4-slope", "value_lo"]
            and theirs.loc["fig4-slope", "value_hi"] < 0
        ),
        "there the q95 drops about tenfold (interval within 5 and 20)": bool(
            5 < drop.value_lo and drop.value_hi < 20
        ),
        "there no window holds a tenth of the sum of the q95 at the lowest T": bool(
            low.max() / low.sum() < 0.1
        ),
        "the printed curve is broken on both texts": bool(
            ours["fig4-printed-bound"] == theirs.loc["fig4-printed-bound", "verdict"]
            == paper_claims.NOT
        ),
    }, described=sentences.describes(res))

# %% [markdown]
# The second text changes no verdict of Figure 4. On the King James Bible no passage stands apart (at the lowest
# temperature no window holds a tenth of the sum over windows of the 95th percentile), and both trends are
# decided against the paper as on the Python documentation: the 95th percentile over a window's heads grows far
# more slowly than $1/T$ below $T = 0.1$ (its slope's interval lies between $-0.5$ and 0), and it drops by about
# ten times once $T \ge 1$, not by a hundred (its interval lies between $\times 5$ and $\times 20$). The printed
# curve is broken on both texts.
