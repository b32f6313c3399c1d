"""attnlimits.studies.training: the selection task, its baselines, the stacked model, train(), the cached sweep and
its tables' round trip through their files."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch

from attnlimits.core import normalizers
from attnlimits.studies import training


def test_task_marks_exactly_n_and_targets_their_mean():
    task = training.selection_task(20, 3, batch=5, d_value=4, d_noise=2, seed=1)
    assert task.x.shape == (5, 20, 4 + 1 + 2)
    assert (task.marked.sum(-1) == 3).all()
    assert torch.equal(task.x[..., 4], task.marked.float())  # the mark feature
    expected = (task.values * task.marked[..., None]).sum(1) / 3
    torch.testing.assert_close(task.target, expected, rtol=0, atol=1e-6)
    again = training.selection_task(20, 3, batch=5, d_value=4, d_noise=2, seed=1)
    assert torch.equal(task.x, again.x) and torch.equal(task.marked, again.marked)
    other = training.selection_task(20, 3, batch=5, d_value=4, d_noise=2, seed=2)
    assert not torch.equal(task.x, other.x)


def test_baselines_on_a_hand_computed_case():
    # values 1, 2, 6 (d_value = 1); tokens 0 and 2 marked: target 3.5, mean of all 3, squared error 0.25
    x = torch.tensor([[[1.0, 1.0], [2.0, 0.0], [6.0, 1.0]]])
    task = training.Task(x=x, marked=torch.tensor([[True, False, True]]), target=torch.tensor([[3.5]]), d_value=1)
    errors = training.baseline_errors(task)
    assert errors["mean"] == pytest.approx(0.25, abs=1e-12)
    assert errors["oracle"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"L": 8, "N": 9, "batch": 2}, "N: must satisfy"),
        ({"L": 1, "N": 1, "batch": 2}, "L: must be an integer >= 2"),
        ({"L": 8, "N": 0, "batch": 2}, "N: must be an integer >= 1"),
        ({"L": 8, "N": 2, "batch": 0}, "batch: must be an integer >= 1"),
        ({"L": 8, "N": 2, "batch": 2, "d_value": 2.5}, "d_value"),
    ],
)
def test_task_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        training.selection_task(**kwargs)


def test_model_weights_and_seeded_initialisation():
    x = training.selection_task(10, 2, batch=3).x
    stacked = x.expand(2, *x.shape)
    outs = {}
    for name in normalizers.NORMALIZERS:
        model = training.SelectionAttention(x.shape[-1], 4, normalizer=name, T=[0.5, 2.0], seeds=[0, 1])
        pred, alpha = model(stacked)
        assert pred.shape == (2, 3, 4) and alpha.shape == (2, 3, 10)
        if normalizers.NORMALIZERS[name].sums_to_one:
            torch.testing.assert_close(alpha.sum(-1), torch.ones(2, 3))
        outs[name] = [p.detach().clone() for p in model.parameters()]
        # the normaliser is applied to q . W_k x / T
        z = torch.einsum("bld,dk,k->bl", x, model.w_key[1], model.query[1]) / 2.0
        torch.testing.assert_close(alpha[1], normalizers.NORMALIZERS[name](z), rtol=1e-5, atol=1e-6)
    first = outs["softmax"]
    for params in outs.values():  # same seeds, same initial parameters, whatever the normaliser
        assert all(torch.equal(a, b) for a, b in zip(params, first, strict=True))
    assert not torch.equal(first[0][0], first[0][1])  # different seeds differ


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"normalizer": "relu"}, "normalizer: must be one of"),
        ({"T": 0.0}, "T: must be a finite number > 0"),
        ({"T": [1.0, 2.0]}, "T: one temperature or one per run"),
        ({"seeds": []}, "seeds: need at least one seed"),
    ],
)
def test_model_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        training.SelectionAttention(8, 4, **kwargs)


def test_model_rejects_wrong_input_shape():
    model = training.SelectionAttention(8, 4, seeds=[0, 1])
    with pytest.raises(ValueError, match="x: expected shape"):
        model(torch.zeros(3, 2, 5, 8))


def test_loss_goes_down_on_an_easy_setting():
    out = training.train("softmax", L=16, N=2, T=1.0, seeds=[0], steps=150, batch=16, pool=64, test=64, lr=0.1)
    loss = out.history.loss.to_numpy()
    assert loss[-10:].mean() < loss[:5].mean() / 10
    final = out.final.iloc[0]
    assert final.rel_error < 0.05  # far below the mean-of-all-tokens baseline (1)
    assert final.mass_on_marked > 0.9
    assert not final.diverged and final.steps_to_target <= 150


def test_seeded_runs_repeat_bit_for_bit_and_record_settings():
    kwargs = {"L": 12, "N": [2, 3], "T": [0.1, 1.0], "seeds": [4, 5], "steps": 20, "batch": 8, "pool": 32}
    a = training.train("1.5-entmax", **kwargs)
    b = training.train("1.5-entmax", **kwargs)
    pd.testing.assert_frame_equal(a.history, b.history, check_exact=True)
    pd.testing.assert_frame_equal(a.final, b.final, check_exact=True)
    assert list(a.final["T"]) == [0.1, 1.0] and list(a.final.N) == [2, 3] and list(a.final.seed) == [4, 5]
    assert len(a.history) == 2 * 20 and set(a.history.step) == set(range(1, 21))
    # the gradient statistics summarise the history
    for r, row in a.final.iterrows():
        part = a.history[a.history.run == r]
        assert row.grad_max == pytest.approx(part.grad_norm.max(), rel=1e-6)
        assert row.grad_mean == pytest.approx(part.grad_norm.mean(), rel=1e-5)
        assert row.grad_spike == pytest.approx(part.grad_norm.max() / part.grad_norm.median(), rel=1e-5)


def test_runs_in_a_stack_match_runs_trained_alone():
    # each run's loss touches only its own parameters, and the first seed fixes the minibatch order: the first
    # run of a stack trains as it would alone
    both = training.train("softmax", L=12, N=2, T=[0.3, 3.0], seeds=[0, 1], steps=15, batch=8, pool=32)
    first = training.train("softmax", L=12, N=2, T=0.3, seeds=[0], steps=15, batch=8, pool=32)
    np.testing.assert_allclose(
        both.history[both.history.run == 0].loss.to_numpy(), first.history.loss.to_numpy(), rtol=1e-5, atol=1e-7
    )


def test_divergence_is_detected_and_recorded():
    out = training.train("softmax", L=12, N=2, T=1.0, seeds=[0], steps=5, batch=8, pool=32, lr=1e30)
    row = out.final.iloc[0]
    assert row.diverged and not math.isnan(row.diverged_at)
    assert math.isnan(row.rel_error)
    assert out.history.loss.isna().any()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"T": [1.0, 2.0]}, "T and N: a number each, or one per seed"),
        ({"steps": 0}, "steps: must be an integer >= 1"),
        ({"batch": 64, "pool": 32}, "batch: must be <= pool"),
        ({"lr": -1.0}, "lr: must be a finite number > 0"),
        ({"normalizer": "nope"}, "normalizer: must be one of"),
        ({"seeds": []}, "seeds: need at least one seed"),
    ],
)
def test_train_rejects_bad_arguments(kwargs, message):
    base = {"L": 8, "N": 2, "steps": 2, "batch": 4, "pool": 8}
    with pytest.raises(ValueError, match=message):
        training.train(**{**base, **kwargs})


TINY = dataclasses.replace(
    training.get_preset("reduced"),
    name="tiny",
    seeds=(0,),
    steps=3,
    batch=4,
    pool=8,
    test=8,
    L=16,
    N_fixed=2,
    temperatures=(1.0,),
    fractions=(0.25,),
    lengths=(8,),
    normalizers=("softmax", "sparsemax"),
    lr_grid=(),
    recent_normalizers=(),
)


def test_presets_and_cached_sweep(tmp_path):
    with pytest.raises(ValueError, match="preset: must be one of"):
        training.get_preset("huge")
    assert training.get_preset("reduced").steps < training.get_preset("full").steps
    assert training.work("full") > 10 * training.work("reduced")
    first = training.results(TINY, root=tmp_path)
    assert set(first.final.experiment) == {"temperature", "fraction", "length"}
    assert len(first.final) == 2 * 3
    second = training.results(TINY, root=tmp_path)  # read back from the cache
    pieces = [name for name, _, _ in training.jobs(TINY)]
    assert len(pieces) == 6 and pieces[0] == "temperature-L16-lr0.03-default-softmax"  # 3 groups, 2 normalisers
    entries = sorted(p.name for p in (tmp_path / "training" / "tiny").iterdir() if not p.name.endswith(".lock"))
    assert entries == sorted(pieces)  # each piece an entry of its own: shipped and audited alone
    for piece in pieces:
        held = sorted(p.name for p in (tmp_path / "training" / "tiny" / piece).iterdir())
        assert held == ["final.csv", "history.csv", "key.json"]
    pd.testing.assert_frame_equal(first.final, second.final, check_dtype=False)  # the seconds too: read back
    again = training.job_results(TINY, pieces[2], root=tmp_path)
    fraction = first.final[(first.final.experiment == "fraction") & (first.final.normalizer == "softmax")]
    pd.testing.assert_frame_equal(again.final, fraction.reset_index(drop=True), check_dtype=False)
    with pytest.raises(ValueError, match="not a piece"):
        training.job_results(TINY, "nope", root=tmp_path)
    summary = training.report.summarize(first.final, ["experiment", "normalizer"])
    assert summary.runs.sum() == 6 and (summary.diverged == 0).all()
    assert training.summarize is training.report.summarize  # still named at the package level


def test_scaled_initialisation_starts_every_temperature_from_the_logits_of_t_1():
    x = training.selection_task(10, 2, batch=3).x
    stacked = x.expand(3, *x.shape)
    temps = [0.01, 1.0, 7.0]
    scaled = training.SelectionAttention(x.shape[-1], 4, T=temps, seeds=[5, 5, 5], init="scaled")
    z = scaled.logits(stacked)
    torch.testing.assert_close(z[0], z[1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(z[2], z[1], rtol=1e-5, atol=1e-6)
    plain = training.SelectionAttention(x.shape[-1], 4, T=temps, seeds=[5, 5, 5])
    torch.testing.assert_close(plain.logits(stacked)[0], 100 * z[1], rtol=1e-4, atol=1e-4)  # 1 / T times larger
    assert torch.equal(plain.w_key, scaled.w_key) and torch.equal(plain.query[1], scaled.query[1])
    with pytest.raises(ValueError, match="init: must be one of"):
        training.SelectionAttention(8, 4, init="orthogonal")


def test_the_learning_rate_grid_trains_every_temperature_at_every_rate_and_initialisation():
    p = TINY.replace(
        temperatures=(0.1, 1.0), lr_grid=(1e-2, 1e-1), lr_steps=4, normalizers=("sparsemax",), decision_seeds=(7, 8)
    )
    out = training.sweep(p, n_jobs=2)
    cells = [(lr, init, T) for lr in (1e-2, 1e-1) for init in ("default", "scaled") for T in (0.1, 1.0)]
    # the grid on the seeds that choose the rate, and again on the seeds kept apart to decide at it
    for experiment, seeds in (("learning-rate", set(p.seeds)), ("learning-rate-decide", {7, 8})):
        grid = out.final[out.final.experiment == experiment]
        assert set(grid.normalizer) == {"softmax"}  # lr_normalizers, whatever the sweep's normalisers
        assert sorted(grid.groupby(["lr", "init", "T"]).size().index) == cells and set(grid.seed) == seeds
    assert (out.final[~out.final.experiment.str.startswith("learning-rate")].lr == p.lr).all()
    assert set(out.history.experiment) == {"temperature", "fraction", "length"}  # no step rows for the grid
    one = training.sweep(p, n_jobs=1)  # the same runs whatever the number of processes
    pd.testing.assert_frame_equal(out.final.drop(columns="seconds"), one.final.drop(columns="seconds"))


def test_final_loss_and_tail_change_summarise_the_last_tenths():
    out = training.train("softmax", L=12, N=2, seeds=[0], steps=40, batch=4, pool=8, lr=0.1)
    loss, row = out.history.loss.to_numpy(), out.final.iloc[0]
    base = training.baseline_errors(training.study._task_data([0], [2], 12, (8, 256), d_value=4, d_noise=3)[0][0])
    assert row.final_loss == pytest.approx(loss[-4:].mean() / base["mean"], rel=1e-5)
    assert row.tail_change == pytest.approx((loss[-4:].mean() - loss[-8:-4].mean()) / base["mean"], rel=1e-4)


def test_geometry_of_a_perfect_selection():
    """Attention spread evenly over the marked tokens: the top N are the marked, and d~ / E_full is 1 up to the
    selected tokens' own terms (each dropped token of weight 0 is at ||s|| from s under both)."""
    task = training.selection_task(16, 4, batch=6, seed=3)
    alpha = task.marked.double() / 4
    geometry = training.study._geometry(
        alpha[None], task.x.double()[None], torch.eye(8)[None, :, :4], task.marked[None]
    )
    assert geometry["top_marked"][0] == 1.0
    assert 0 < geometry["ns_frac"][0] <= 1
    assert geometry["dtilde_over_E"][0] > 1.5
    # d~ = (L - N) ||s|| exactly; E_full = ((L - N) / L) (sum over dropped ||s|| + sum over selected ||2 y_i - s||)
    v = task.values.double()
    s = (alpha[..., None] * v).sum(1)
    d = (12 * s.norm(dim=-1)).mean()
    y = alpha[..., None] * v
    inner = (2 * y - s[:, None]).norm(dim=-1)
    e_full = (12 / 16 * torch.where(task.marked, inner, s.norm(dim=-1)[:, None]).sum(-1)).mean()
    assert geometry["dtilde_over_E_full"][0] == pytest.approx(float(d / e_full), rel=1e-12)


def test_training_round_trips_through_its_files(tmp_path):
    """Every table reads back as computed (float32 losses to their last bit, float64 finals exactly), and the
    loaded result writes the very same files again."""
    computed = training.sweep(TINY.replace(steps=30))  # 360 losses and gradient norms
    first = computed.save(tmp_path / "first")
    loaded = training.Training.load(first)
    for name in training.Training.TABLES:
        table = getattr(computed, name)
        back = getattr(loaded, name).astype(table.dtypes.to_dict())
        pd.testing.assert_frame_equal(back, table, check_exact=True, obj=name)
    second = loaded.save(tmp_path / "second")
    files = sorted(p.name for p in first.iterdir())
    assert files == ["final.csv", "history.csv"] == sorted(p.name for p in second.iterdir())
    for file in files:
        assert (first / file).read_bytes() == (second / file).read_bytes(), file


def test_the_later_normalisers_train_on_the_n_over_l_grid_with_softmaxs_seeds_and_tasks():
    p = training.get_preset("reduced")
    groups = {g.experiment: g for g in training.study._groups(p)}
    recent, paper = groups["fraction-recent"], groups["fraction"]
    assert recent.normalizers == tuple(normalizers.names("recent")) and "softmax" in paper.normalizers
    assert recent.runs == paper.runs and (recent.lr, recent.steps, recent.init) == (paper.lr, paper.steps, "default")
    assert "fraction-recent" not in {g.experiment for g in training.study._groups(p.replace(recent_normalizers=()))}
