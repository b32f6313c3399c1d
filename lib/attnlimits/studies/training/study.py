"""A small trainable attention model on a selection task whose difficulty is set by hand (chapter 32).

The task (:func:`selection_task`): a sequence of L tokens, N of them marked. Token i carries a value vector
v_i (``d_value`` standard normal entries), a mark feature m_i (1 for the N marked tokens, 0 otherwise) and
``d_noise`` distractor entries; the target is the mean of the marked tokens' values. Two baselines bracket
every error: predicting the mean of all tokens' values (what uniform attention returns; the trained analogue of
the random-selection expectation) and the oracle that attends uniformly to the marked tokens (error 0 here, since
the target is exactly their mean).

The model (:class:`SelectionAttention`): one attention layer with a learned query, alpha =
normaliser(q . W_k x_i / T) and prediction sum_i alpha_i W_v x_i, for any normaliser of
:mod:`attnlimits.core.normalizers`, its query initialised either the same at every T or scaled by T
(:data:`INITS`). Several independent runs (seeds, temperatures, N) train side by side as one
stacked model: every parameter has a leading run axis and each run's loss touches only its own parameters, so
the runs do not interact (Adam is elementwise).

:func:`train` trains one group of runs and returns a :class:`Training`: a tidy per-step ``history`` (loss and
the gradient norm of the attention parameters q and W_k) and one ``final`` row per run (test error, baselines,
steps to a target loss, the loss at the end and how much it still moved, gradient statistics, divergence).
:func:`sweep` runs a preset's grid of groups (among them a learning-rate grid per temperature),
:func:`results` keeps it in the results cache (:mod:`attnlimits.infra.cache`), keyed by the preset and the code.

One concept, one module (over 600 lines): the training study, the task, the stacked model and its training
loop, which share the run axis.
"""

from __future__ import annotations

import functools
import math
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from attnlimits.core import normalizers, rowstats
from attnlimits.infra import cache, presets, provenance
from attnlimits.infra.progress import check_jobs

__all__ = [
    "GEOMETRY",
    "INITS",
    "PRESETS",
    "SelectionAttention",
    "Task",
    "Training",
    "TrainingPreset",
    "baseline_errors",
    "get_preset",
    "job_results",
    "jobs",
    "results",
    "selection_task",
    "sweep",
    "train",
    "work",
]


# ----------------------------------------------------------------------------------------------------------------
# argument checks
# ----------------------------------------------------------------------------------------------------------------
def _int(name: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name}: must be an integer >= {low}, got {value!r}")
    return int(value)


def _pos(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: must be a finite number > 0, got {value!r}")
    return float(value)


def _normalizer(name: str):
    if name not in normalizers.NORMALIZERS:
        raise ValueError(f"normalizer: must be one of {list(normalizers.NORMALIZERS)}, got {name!r}")
    return normalizers.NORMALIZERS[name]


# ----------------------------------------------------------------------------------------------------------------
# the task
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """One batch of the selection task: ``x`` (..., B, L, d_in), ``marked`` (..., B, L) bool, ``target``
    (..., B, d_value). Features of x: the value vector (first ``d_value``), the mark, then the distractors."""

    x: torch.Tensor
    marked: torch.Tensor
    target: torch.Tensor
    d_value: int

    @property
    def values(self) -> torch.Tensor:
        return self.x[..., : self.d_value]


def selection_task(
    L: int, N: int, *, batch: int, d_value: int = 4, d_noise: int = 3, seed: int = 0, dtype=torch.float32
) -> Task:
    """``batch`` sequences of L tokens with exactly N marked at uniformly random positions; seeded.

    Token features: v_i ~ N(0, I_{d_value}), the mark m_i in {0, 1}, ``d_noise`` N(0, 1) distractors. Target: the
    mean of v_i over the marked tokens.
    """
    L, N, batch = _int("L", L, 2), _int("N", N), _int("batch", batch)
    d_value, d_noise = _int("d_value", d_value), _int("d_noise", d_noise, 0)
    if N > L:
        raise ValueError(f"N: must satisfy 1 <= N <= L = {L}, got {N}")
    gen = torch.Generator().manual_seed(int(seed))
    values = torch.randn(batch, L, d_value, generator=gen, dtype=torch.float64)
    noise = torch.randn(batch, L, d_noise, generator=gen, dtype=torch.float64)
    order = torch.rand(batch, L, generator=gen, dtype=torch.float64).argsort(dim=-1)
    marked = torch.zeros(batch, L, dtype=torch.bool).scatter(-1, order[:, :N], True)
    x = torch.cat([values, marked.unsqueeze(-1).to(torch.float64), noise], dim=-1)
    target = (values * marked.unsqueeze(-1)).sum(dim=-2) / N
    return Task(x.to(dtype), marked, target.to(dtype), d_value)


def baseline_errors(task: Task) -> dict[str, float]:
    """Mean squared error (per value entry) of the two trivial predictors: ``mean`` predicts the mean of all tokens'
    values, ``oracle`` the mean of the marked tokens' values (uniform attention on the marked set)."""
    v = task.values
    all_mean = v.mean(dim=-2)
    m = task.marked.unsqueeze(-1).to(v.dtype)
    oracle = (v * m).sum(dim=-2) / m.sum(dim=-2)
    return {
        "mean": float(((all_mean - task.target) ** 2).mean()),
        "oracle": float(((oracle - task.target) ** 2).mean()),
    }


# ----------------------------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------------------------
#: How the query is initialised: ``"default"`` draws q ~ N(0, I / d_key) whatever the temperature (so at a small
#: T the initial logits q . W_k x / T are huge and every row starts nearly one-hot); ``"scaled"`` multiplies that
#: draw by T, so that the initial logits are those of T = 1 at every temperature (a learned query can absorb T:
#: what then remains of a temperature is how far one optimiser step moves the logits).
INITS = ("default", "scaled")


class SelectionAttention(torch.nn.Module):
    """``runs`` independent one-layer attention models with a learned query, stacked along a leading run axis.

    forward(x (runs, B, L, d_in)) -> (prediction (runs, B, d_value), alpha (runs, B, L)), with
    alpha = normaliser(q . W_k x_i / T) and prediction sum_i alpha_i W_v x_i. ``T``: one temperature, or one per run.
    ``seeds``: one initialisation seed per run (the same seed gives the same initial parameters whatever the
    normaliser and T, so that runs differ only by what is compared). ``init``: one of :data:`INITS` (``"scaled"``:
    the query's draw times the run's T).
    """

    def __init__(
        self,
        d_in: int,
        d_value: int,
        *,
        normalizer: str = "softmax",
        T=1.0,
        seeds=(0,),
        d_key: int = 16,
        init: str = "default",
    ):
        super().__init__()
        self.normalizer_name = normalizer
        self._fn = _normalizer(normalizer)
        d_in, d_value, d_key = _int("d_in", d_in), _int("d_value", d_value), _int("d_key", d_key)
        seeds = [int(s) for s in seeds]
        if not seeds:
            raise ValueError("seeds: need at least one seed (one per run)")
        temps = [T] * len(seeds) if isinstance(T, numbers.Real) else list(T)
        if len(temps) != len(seeds):
            raise ValueError(f"T: one temperature or one per run ({len(seeds)}), got {len(temps)}")
        if init not in INITS:
            raise ValueError(f"init: must be one of {INITS}, got {init!r}")
        self.register_buffer("T", torch.tensor([_pos("T", t) for t in temps], dtype=torch.float32))
        q, wk, wv = [], [], []
        for s, t in zip(seeds, temps, strict=True):
            gen = torch.Generator().manual_seed(s)
            q.append(torch.randn(d_key, generator=gen) / math.sqrt(d_key) * (float(t) if init == "scaled" else 1.0))
            wk.append(torch.randn(d_in, d_key, generator=gen) / math.sqrt(d_in))
            wv.append(torch.randn(d_in, d_value, generator=gen) / math.sqrt(d_in))
        self.query = torch.nn.Parameter(torch.stack(q))
        self.w_key = torch.nn.Parameter(torch.stack(wk))
        self.w_value = torch.nn.Parameter(torch.stack(wv))

    @property
    def runs(self) -> int:
        return self.query.shape[0]

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Attention logits q . W_k x_i / T, (runs, B, L)."""
        u = torch.einsum("rdk,rk->rd", self.w_key, self.query)  # W_k q first: O(L d) per sequence
        return torch.einsum("rbld,rd->rbl", x, u) / self.T[:, None, None]

    def forward(self, x: torch.Tensor, logits: torch.Tensor | None = None):
        if x.dim() != 4 or x.shape[0] != self.runs:
            raise ValueError(f"x: expected shape (runs={self.runs}, B, L, d_in), got {tuple(x.shape)}")
        z = self.logits(x) if logits is None else logits
        alpha = self._fn(z, dim=-1)  # T already divides the logits
        pooled = torch.einsum("rbl,rbld->rbd", alpha, x)  # attend first, then project: O(L d) per sequence
        pred = torch.einsum("rbd,rdv->rbv", pooled, self.w_value)
        return pred, alpha


# ----------------------------------------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Training:
    """``history``: one row per run and step (``run, step, loss, grad_norm``); ``final``: one row per run with its
    settings (``lr`` and ``init`` among them), test error, baselines, ``rel_error`` = test error /
    mean-of-all-tokens error, steps to the target loss, the geometry of its attention on the test set
    (:data:`GEOMETRY`), ``final_loss`` (the training loss over the last tenth of
    the steps, relative to the baseline) and ``tail_change`` (its change from the tenth before: near 0 once the
    run has converged), gradient-norm statistics and divergence."""

    history: pd.DataFrame
    final: pd.DataFrame

    #: Each table and the float format it is written with: the losses to 9 significant digits (float32 values),
    #: the final rows to 17 (every float64 reads back exactly).
    TABLES: ClassVar[dict[str, str]] = {"history": "%.9g", "final": "%.17g"}

    def save(self, folder) -> Path:
        """Write each table of :attr:`TABLES` to ``<folder>/<table>.csv``; the folder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name, float_format in self.TABLES.items():
            getattr(self, name).to_csv(folder / f"{name}.csv", index=False, float_format=float_format)
        return folder

    @classmethod
    def load(cls, folder) -> Training:
        """The tables :meth:`save` wrote to ``folder``."""
        folder = Path(folder)
        return cls(**{name: pd.read_csv(folder / f"{name}.csv") for name in cls.TABLES})


def _one_thread(fn):
    """Run ``fn`` with torch on one thread (then restore the count): the runs are small, one thread is fastest on a
    shared machine, and one arithmetic order on every machine keeps seeded runs identical."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(threads)

    return wrapper


def _seed_data(seed: int, L: int, N: int) -> int:
    return 1_000_003 * int(seed) + 1009 * int(L) + int(N)


@_one_thread
def train(
    normalizer: str = "softmax",
    *,
    L: int = 64,
    N: int = 4,
    T=1.0,
    seeds: Sequence[int] = (0,),
    steps: int = 300,
    batch: int = 32,
    pool: int = 256,
    test: int = 256,
    lr: float = 3e-2,
    d_value: int = 4,
    d_noise: int = 3,
    d_key: int = 16,
    target: float = 0.1,
    init: str = "default",
) -> Training:
    """Train one run per (seed, T) pair (``T`` a number or one per seed; ``N`` a number or one per seed) with Adam
    at learning rate ``lr``, the query initialised as ``init`` says (:data:`INITS`).

    Each seed fixes its initial parameters, its training pool of ``pool`` sequences (minibatches of ``batch`` drawn
    from it in a seeded order) and its test set of ``test`` sequences; neither depends on the normaliser or T.
    ``target``: a run reaches the target loss at the first step whose training loss is at most ``target`` times
    the pool's mean-of-all-tokens error. A run diverges when a logit or parameter stops being finite; its later
    steps are NaN and its parameters are frozen at zero. Deterministic: the same arguments repeat bit for bit.
    """
    seeds, temps, counts = _runs(seeds, T, N)
    steps, batch, pool, test = _int("steps", steps), _int("batch", batch), _int("pool", pool), _int("test", test)
    if batch > pool:
        raise ValueError(f"batch: must be <= pool = {pool}, got {batch}")
    lr, target = _pos("lr", lr), _pos("target", target)
    L = _int("L", L, 2)
    d_in = d_value + 1 + d_noise
    model = SelectionAttention(d_in, d_value, normalizer=normalizer, T=temps, seeds=seeds, d_key=d_key, init=init)
    tasks, tests = _task_data(seeds, counts, L, (pool, test), d_value=d_value, d_noise=d_noise)
    x_pool = torch.stack([t.x for t in tasks])
    y_pool = torch.stack([t.target for t in tasks])
    base = torch.tensor([baseline_errors(t)["mean"] for t in tasks])
    gen = torch.Generator().manual_seed(_seed_data(seeds[0], L, counts[0]) + 13)
    order = torch.cat([torch.randperm(pool, generator=gen) for _ in range(steps * batch // pool + 1)])
    losses, gnorms, alive, diverged_at = _fit(model, x_pool, y_pool, order, steps=steps, batch=batch, lr=lr)
    final = _final(model, tests, losses, gnorms, base, alive, diverged_at, target)
    settings = pd.DataFrame(
        {
            "normalizer": normalizer,
            "L": L,
            "N": counts,
            "T": temps,
            "seed": seeds,
            "lr": lr,
            "init": init,
            "run": range(len(seeds)),
        }
    )
    history = settings.merge(_history(losses, gnorms), on="run")
    return Training(history=history, final=pd.concat([settings, final], axis=1))


def _runs(seeds, T, N) -> tuple[list[int], list, list]:
    """The runs' seeds, temperatures and selection counts (``T`` and ``N`` a number each, or one per seed)."""
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    runs = len(seeds)
    temps = [T] * runs if isinstance(T, numbers.Real) else list(T)
    counts = [N] * runs if isinstance(N, numbers.Integral) else list(N)
    if len(temps) != runs or len(counts) != runs:
        raise ValueError(f"T and N: a number each, or one per seed ({runs}); got {len(temps)} and {len(counts)}")
    return seeds, temps, counts


def _task_data(seeds, counts, L: int, sizes: tuple[int, int], *, d_value: int, d_noise: int) -> tuple[list, list]:
    """Each run's training pool and test set, seeded by its seed, L and N alone; runs sharing both share data."""
    made: dict = {}

    def data(s, n, size, offset):
        key = (s, n, size, offset)
        if key not in made:
            seed = _seed_data(s, L, n) + offset
            made[key] = selection_task(L, n, batch=size, d_value=d_value, d_noise=d_noise, seed=seed)
        return made[key]

    pool, test = sizes
    tasks = [data(s, n, pool, 0) for s, n in zip(seeds, counts, strict=True)]
    tests = [data(s, n, test, 7) for s, n in zip(seeds, counts, strict=True)]
    return tasks, tests


def _fit(model, x_pool, y_pool, order, *, steps: int, batch: int, lr: float) -> tuple:
    """Adam on every run at once: each step's loss and gradient norm per run, and which runs diverged when."""
    runs = x_pool.shape[0]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = torch.full((steps, runs), math.nan)
    gnorms = torch.full((steps, runs), math.nan)
    alive = torch.ones(runs, dtype=torch.bool)
    diverged_at = [None] * runs
    for step in range(steps):
        idx = order[step * batch : (step + 1) * batch]
        x, y = x_pool[:, idx], y_pool[:, idx]
        opt.zero_grad(set_to_none=False)
        z = model.logits(x)
        bad = ~torch.isfinite(z).flatten(1).all(dim=1) & alive
        if bad.any():
            _kill(model, bad, alive, diverged_at, step)
            z = model.logits(x)
        pred, _ = model(x, logits=z)
        per_run = ((pred - y) ** 2).mean(dim=(1, 2))
        per_run.sum().backward()
        gn = torch.sqrt(model.query.grad.pow(2).sum(1) + model.w_key.grad.pow(2).sum((1, 2)))
        losses[step] = torch.where(alive, per_run.detach(), math.nan)
        gnorms[step] = torch.where(alive, gn, math.nan)
        for p in model.parameters():
            p.grad[~alive] = 0
        opt.step()
        with torch.no_grad():  # Adam's momentum would still move a dead run: keep it at zero
            for p in model.parameters():
                p[~alive] = 0
        finite = torch.stack([p.detach().flatten(1).isfinite().all(1) for p in model.parameters()]).all(0)
        if (~finite & alive).any():
            _kill(model, ~finite & alive, alive, diverged_at, step + 1)
    return losses, gnorms, alive, diverged_at


def _history(losses: torch.Tensor, gnorms: torch.Tensor) -> pd.DataFrame:
    """The loss and gradient norm of every run at every step (steps from 1), run by run within each step."""
    steps, runs = losses.shape
    return pd.DataFrame(
        {
            "run": np.tile(np.arange(runs), steps),
            "step": np.repeat(np.arange(1, steps + 1), runs),
            "loss": losses.reshape(-1).numpy(),
            "grad_norm": gnorms.reshape(-1).numpy(),
        }
    )


def _kill(model, which, alive, diverged_at, step) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p[which] = 0
    for r in torch.nonzero(which).flatten().tolist():
        diverged_at[r] = step
    alive &= ~which


#: The share of a run's steps its ``final_loss`` averages (the last tenth), and the tenth before them is what
#: ``tail_change`` compares it with: a run whose loss still falls by more than a few hundredths of the baseline
#: over its last tenth has not converged.
TAIL = 0.1


def _tail_losses(losses: torch.Tensor, base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each run's mean training loss over the last :data:`TAIL` of its steps and over the tenth before, both
    relative to its pool's mean-of-all-tokens error ``base``: ``(final, before)``, each ``(runs,)``."""
    steps = losses.shape[0]
    k = max(1, round(TAIL * steps))
    final = losses[steps - k :].mean(0) / base
    before = losses[max(0, steps - 2 * k) : steps - k].mean(0) / base if steps > k else final
    return final, before


#: The paper's geometry of a trained run's attention (:func:`_geometry`), columns of the final table.
GEOMETRY = ("ns_frac", "top_marked", "dtilde_over_E", "dtilde_over_E_full")


def _geometry(alpha: torch.Tensor, x: torch.Tensor, w_value: torch.Tensor, marked: torch.Tensor) -> dict:
    """Per run, the paper's geometry of its trained attention on its test sequences, with the selected set its N
    largest weights (N the run's marked count) and the tokens as the head sees them, v_i = W_v x_i: ``ns_frac``
    N_s/N at Algorithm 4's radius (the mean over sequences), ``top_marked`` the share of the selected that are
    marked, ``dtilde_over_E`` and ``dtilde_over_E_full`` the mean d~ over the mean of its random-selection
    expectation under the readings E and E_full (:mod:`attnlimits.core.rowstats`; each sequence one query row
    that sees all L tokens). ``alpha`` ``(runs, B, L)``, ``x`` ``(runs, B, L, d_in)``, ``marked`` ``(runs, B, L)``."""
    runs, _, L = alpha.shape
    out = {name: torch.full((runs,), math.nan, dtype=torch.float64) for name in GEOMETRY}
    at = torch.tensor([L - 1])
    for r in range(runs):
        n = int(marked[r, 0].sum())
        if not 1 <= n < L or not torch.isfinite(alpha[r]).all():
            continue
        a = alpha[r].double().unsqueeze(1)  # (B, 1, L): each sequence a "head" of one query row
        v = x[r].double() @ w_value[r].detach().double()  # (B, L, d_value)
        out["ns_frac"][r] = rowstats.separability(a, v, [n], positions=at)[0].mean()
        out["top_marked"][r] = marked[r].gather(-1, alpha[r].topk(n, -1).indices).double().mean()
        d = rowstats.distances(a, v, [n], positions=at)[0].mean()
        out["dtilde_over_E"][r] = d / rowstats.expectation(a, v, [n], positions=at).mean()
        out["dtilde_over_E_full"][r] = d / rowstats.expectation(a, v, [n], positions=at, full=True).mean()
    return out


def _final(model, tests, losses, gnorms, base, alive, diverged_at, target) -> pd.DataFrame:
    x = torch.stack([t.x for t in tests])
    y = torch.stack([t.target for t in tests])
    with torch.no_grad():
        z = model.logits(x)
        bad = ~torch.isfinite(z).flatten(1).all(dim=1) & alive
        for r in torch.nonzero(bad).flatten().tolist():  # finite parameters, but logits overflow on the test set
            diverged_at[r] = losses.shape[0]
        alive &= ~bad
        pred, alpha = model(x, logits=torch.where(alive[:, None, None], z, torch.zeros_like(z)))
        mse = ((pred - y) ** 2).mean(dim=(1, 2))
        marked = torch.stack([t.marked for t in tests])
        on_marked = (alpha * marked).sum(-1).mean(-1)
        geometry = _geometry(alpha, x, model.w_value, marked)
    tail, before = _tail_losses(losses, base)
    rows = []
    for r, t in enumerate(tests):
        b = baseline_errors(t)
        g = gnorms[:, r][torch.isfinite(gnorms[:, r])]
        hit = torch.nonzero(losses[:, r] <= target * base[r]).flatten()
        ok = bool(alive[r])
        rows.append(
            {
                "test_mse": float(mse[r]) if ok else math.nan,
                "mean_mse": b["mean"],
                "oracle_mse": b["oracle"],
                "rel_error": float(mse[r]) / b["mean"] if ok else math.nan,
                "mass_on_marked": float(on_marked[r]) if ok else math.nan,
                "steps_to_target": int(hit[0]) + 1 if len(hit) else math.nan,
                **{name: float(values[r]) if ok else math.nan for name, values in geometry.items()},
                "final_loss": float(tail[r]) if ok else math.nan,
                "tail_change": float(tail[r] - before[r]) if ok else math.nan,
                "grad_mean": float(g.mean()) if len(g) else math.nan,
                "grad_var": float(g.var()) if len(g) > 1 else math.nan,
                "grad_max": float(g.max()) if len(g) else math.nan,
                "grad_spike": float(g.max() / g.quantile(0.5)) if len(g) and g.quantile(0.5) > 0 else math.nan,
                "diverged": not ok,
                "diverged_at": diverged_at[r] if diverged_at[r] is not None else math.nan,
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------------
# the chapter's grid, its presets and the cache
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingPreset(presets.StudyPreset):
    """The grids of chapter 32. ``temperatures`` at (``L``, ``N_fixed``); ``fractions`` N/L at ``L`` (T = 1);
    ``lengths`` at ``length_fraction`` (T = 1); every run for every normaliser of ``normalizers`` (by default the
    paper's family, :func:`attnlimits.core.normalizers.names`) and seed, at learning rate ``lr``.
    The learning-rate grid: the temperature grid again for each normaliser of ``lr_normalizers``, at every
    learning rate of ``lr_grid`` and with each query initialisation of ``inits`` (:data:`INITS`), for
    ``lr_steps`` steps (none when ``lr_grid`` is empty). ``decision_seeds``: seeds kept apart from ``seeds``, on
    which the learning-rate grid is trained again (experiment ``"learning-rate-decide"``), so that a claim judged at
    the learning rate chosen on ``seeds`` is decided on runs that did not choose it. ``recent_normalizers``: the
    normalisers proposed after the paper (chapter 36), trained on the N/L grid only (T = 1, learning rate ``lr``;
    experiment ``"fraction-recent"``, the same seeds and tasks as softmax's ``"fraction"`` runs)."""

    seeds: tuple[int, ...]
    steps: int
    batch: int
    L: int
    N_fixed: int
    temperatures: tuple[float, ...]
    fractions: tuple[float, ...]
    lengths: tuple[int, ...]
    length_fraction: float
    normalizers: tuple[str, ...] = tuple(normalizers.names("paper"))
    pool: int = 256
    test: int = 256
    lr: float = 3e-2
    lr_grid: tuple[float, ...] = ()
    lr_normalizers: tuple[str, ...] = ("softmax",)
    lr_steps: int = 1000
    inits: tuple[str, ...] = INITS
    decision_seeds: tuple[int, ...] = ()
    recent_normalizers: tuple[str, ...] = ()
    notes: str = field(default="", compare=False)


_T_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: Adam's learning rates of the learning-rate grid: half decades around the sweep's 0.03.
_LR_GRID = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
#: The 20 seeds that decide the claims judged at a chosen learning rate, apart from the seeds that choose it.
_DECISION_SEEDS = tuple(range(100, 120))
PRESETS = presets.Registry(
    "training",
    TrainingPreset,
    TrainingPreset(
        name="reduced",
        seeds=(0, 1, 2, 3, 4),
        steps=250,
        batch=32,
        L=128,
        N_fixed=8,
        temperatures=_T_GRID,
        fractions=(0.01, 0.03, 0.06, 0.12, 0.25, 0.5),
        lengths=(64, 256, 1024),
        length_fraction=0.0625,
        pool=256,
        lr_grid=_LR_GRID,
        lr_steps=1000,
        decision_seeds=_DECISION_SEEDS,
        recent_normalizers=tuple(normalizers.names("recent")),
        notes="reduced: L = 128 for the temperature and N/L grids, 5 seeds, 250 Adam steps of 32 sequences; "
        "softmax's temperature grid again at 5 learning rates and 2 initialisations, 1000 steps, on those 5 seeds "
        "and on 20 others; the later normalisers on the N/L grid",
    ),
    TrainingPreset(
        name="full",
        seeds=(0, 1, 2, 3, 4),
        steps=1500,
        batch=64,
        L=256,
        N_fixed=16,
        temperatures=_T_GRID,
        fractions=(0.01, 0.02, 0.03, 0.045, 0.06, 0.09, 0.12, 0.18, 0.25, 0.35, 0.5),
        lengths=(64, 256, 1024),
        length_fraction=0.0625,
        pool=2048,
        lr_grid=_LR_GRID,
        lr_normalizers=tuple(normalizers.names("paper")),
        lr_steps=1500,
        decision_seeds=_DECISION_SEEDS,
        recent_normalizers=tuple(normalizers.names("recent")),
        notes="full: 5 seeds, 1500 Adam steps of 64 sequences, 11 fractions N/L; the temperature grid of every "
        "normaliser of the paper's family at 5 learning rates and 2 initialisations",
    ),
    TrainingPreset(
        name="quick",
        seeds=(0,),
        steps=20,
        batch=8,
        L=32,
        N_fixed=2,
        temperatures=(0.1, 1.0, 10.0),
        fractions=(0.06, 0.25),
        lengths=(16, 64),
        length_fraction=0.125,
        pool=32,
        test=32,
        lr_grid=(1e-2, 1e-1),
        lr_steps=20,
        recent_normalizers=tuple(normalizers.names("recent")),
        notes="quick: a smoke run of seconds (1 seed, 20 Adam steps of 8 sequences, L = 32)",
    ),
)


def get_preset(preset) -> TrainingPreset:
    """A preset by name (``"reduced"``, ``"full"`` or ``"quick"``: a smoke run of seconds) or a :class:`TrainingPreset`
    itself."""
    return PRESETS.get(preset)


@dataclass(frozen=True)
class _Group:
    """Runs that train as one stacked model per normaliser: one experiment's (N, T, seed) at one L, learning rate,
    initialisation and step count."""

    experiment: str
    L: int
    runs: list
    lr: float
    init: str
    steps: int
    normalizers: tuple[str, ...]


def _groups(p: TrainingPreset) -> list[_Group]:
    """The preset's groups: the temperature and N/L grids, the later normalisers' N/L grid, the length grid, then
    the learning-rate grid, on the preset's seeds and again on its decision seeds."""
    t_runs = [(p.N_fixed, T, s) for T in p.temperatures for s in p.seeds]
    f_runs = [(max(1, round(f * p.L)), 1.0, s) for f in p.fractions for s in p.seeds]
    plain = {"lr": p.lr, "init": "default", "steps": p.steps, "normalizers": p.normalizers}
    groups = [_Group("temperature", p.L, t_runs, **plain), _Group("fraction", p.L, f_runs, **plain)]
    if p.recent_normalizers:
        groups.append(_Group("fraction-recent", p.L, f_runs, **{**plain, "normalizers": p.recent_normalizers}))
    for L in p.lengths:
        if L != p.L:
            groups.append(
                _Group("length", L, [(max(1, round(p.length_fraction * L)), 1.0, s) for s in p.seeds], **plain)
            )
    d_runs = [(p.N_fixed, T, s) for T in p.temperatures for s in p.decision_seeds]
    for lr in p.lr_grid:
        for init in p.inits:
            groups.append(_Group("learning-rate", p.L, t_runs, lr, init, p.lr_steps, p.lr_normalizers))
            if d_runs:
                groups.append(_Group("learning-rate-decide", p.L, d_runs, lr, init, p.lr_steps, p.lr_normalizers))
    return groups


def work(preset="reduced") -> int:
    """The preset's training work in token-steps (runs x L x steps x batch, summed over groups and normalisers):
    the training time grows about linearly with it, so the ratio of two presets' work extrapolates a time."""
    p = get_preset(preset)
    return sum(len(g.runs) * g.L * g.steps * p.batch * len(g.normalizers) for g in _groups(p))


def _train_group(g: _Group, name: str, p: TrainingPreset) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """One group's runs for one normaliser: its history and final rows, each with the experiment, and the wall time."""
    t0 = time.perf_counter()
    out = train(
        name,
        L=g.L,
        N=[r[0] for r in g.runs],
        T=[r[1] for r in g.runs],
        seeds=[r[2] for r in g.runs],
        steps=g.steps,
        batch=p.batch,
        pool=p.pool,
        test=p.test,
        lr=g.lr,
        init=g.init,
    )
    seconds = time.perf_counter() - t0
    if g.experiment.startswith("learning-rate"):  # its final rows carry what it needs (final_loss, tail_change)
        out.history = out.history.iloc[:0]
    out.history.insert(0, "experiment", g.experiment)
    out.final.insert(0, "experiment", g.experiment)
    out.final["seconds"] = seconds
    return out.history, out.final, seconds


def sweep(preset="reduced", *, progress: bool = False, n_jobs: int = 1) -> Training:
    """Every group of the preset for every normaliser; ``final`` gains an ``experiment`` column
    (``temperature``, ``fraction``, ``fraction-recent``, ``length``, ``learning-rate`` or
    ``learning-rate-decide``) and ``seconds`` (the
    group's wall time).
    ``history`` holds the steps of every experiment but the learning-rate grid's (hundreds of runs: its final rows
    keep the loss at the end and how much it still moved).
    ``n_jobs`` (an integer >= 1, or -1 for every core): groups in parallel, in processes (each trains on one
    thread, so the results do not depend on it)."""
    from joblib import Parallel, delayed

    p = get_preset(preset)
    pieces = jobs(p)
    done = Parallel(n_jobs=check_jobs(n_jobs), prefer="processes")(delayed(_train_group)(g, n, p) for _, g, n in pieces)
    return _joined(pieces, [Training(h, f) for h, f, _ in done], progress)


def _joined(pieces, parts: list[Training], progress: bool) -> Training:
    """The pieces' tables in the order of :func:`jobs`; with ``progress``, a line per piece."""
    if progress:
        for (name, g, _), part in zip(pieces, parts, strict=True):
            print(f"{name:<52} {len(g.runs)} runs in {part.final.seconds.iloc[0]:.1f} s")
    history = pd.concat([t.history for t in parts], ignore_index=True)
    return Training(history, pd.concat([t.final for t in parts], ignore_index=True))


def jobs(preset="reduced") -> list[tuple[str, _Group, str]]:
    """The preset's independent pieces of training, each cached on its own: ``(name, group, normaliser)`` for every
    group and every normaliser it trains (``temperature-L128-lr0.03-default-softmax``, ...)."""
    p = get_preset(preset)
    return [(f"{g.experiment}-L{g.L}-lr{g.lr:g}-{g.init}-{n}", g, n) for g in _groups(p) for n in g.normalizers]


def job_results(preset, name: str, *, root=None) -> Training:
    """One piece of :func:`jobs` from the cache entry ``<root>/training/<preset>/<name>`` when the same preset and
    code produced it, else trained and stored there (:func:`attnlimits.infra.cache.cached`; the key is the preset,
    the piece, the code of this module and of everything it imports, and the torch version)."""
    p = get_preset(preset)
    found = {job: (g, n) for job, g, n in jobs(p)}
    if name not in found:
        raise ValueError(f"name: {name!r} is not a piece of the {p.name} preset's training; see training.jobs()")
    g, normalizer = found[name]
    folder = Path(provenance.results_root() if root is None else root) / "training" / p.name / name
    key = cache.study_key(__name__, preset=p.as_dict(), job=name)
    return cache.cached(folder, key, lambda: _piece(g, normalizer, p), Training.save, Training.load)


def _piece(g: _Group, normalizer: str, p: TrainingPreset) -> Training:
    """One piece of the sweep trained: :func:`_train_group`'s tables."""
    history, final, _ = _train_group(g, normalizer, p)
    return Training(history, final)


def results(preset="reduced", *, root=None, progress: bool = False, n_jobs: int = 1) -> Training:
    """:func:`sweep` from the results cache, one entry per piece of :func:`jobs` (:func:`job_results`: read back
    when current, else trained), put together in the order of :func:`sweep`. ``root``:
    :func:`attnlimits.infra.provenance.results_root` by default. ``n_jobs``: pieces in parallel, as in :func:`sweep`
    (the results do not depend on it); ``progress``: a line per piece with its runs and training time."""
    from joblib import Parallel, delayed

    p = get_preset(preset)
    pieces = jobs(p)
    done = Parallel(n_jobs=check_jobs(n_jobs), prefer="processes")(
        delayed(job_results)(p, name, root=root) for name, _, _ in pieces
    )
    return _joined(pieces, done, progress)
