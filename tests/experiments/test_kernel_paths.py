"""The shipped numbers across the CPU's kernel paths: a window computed with torch's AVX2 kernels and with the
machine's own (``ATEN_CPU_CAPABILITY``, read when torch starts, so each run is its own process) gives the same
decisions (each critical N, each KS p-value) and floats within the tolerances the audit applies across kernel
paths (:data:`attnlimits.infra.shipping.ACROSS_KERNELS`)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import torch

from attnlimits.infra import shipping

SCRIPT = textwrap.dedent(
    """
    import os, pickle, sys
    import torch
    import tiny_models
    from attnlimits import experiments, models
    from attnlimits.experiments import summaries

    torch.set_num_threads(1)
    model = tiny_models.llama(positions=128, seed=5)
    ids = torch.randint(0, 300, (1, 96), generator=torch.Generator().manual_seed(3))[0]
    cap = models.capture(model, ids, index=0)
    p = tiny_models.experiments_preset()
    res = experiments.run_arrays(
        [c.weights for c in cap], [c.v for c in cap], [c.logits for c in cap], preset=p, seed=0
    )
    out = summaries.summarize(res, ("distance", "separability", "gradient", "sink"))
    out["capability"] = str(torch.backends.cpu.get_cpu_capability())
    pickle.dump(out, open(sys.argv[1], "wb"))
    """
)


def _run(tmp_path, capability: str | None) -> dict:
    out = tmp_path / f"{capability or 'own'}.pkl"
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if capability is not None:
        env["ATEN_CPU_CAPABILITY"] = capability
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(__file__)), env.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, check=True, timeout=300)
    return pickle.loads(out.read_bytes())


@pytest.mark.skipif(
    str(torch.backends.cpu.get_cpu_capability()) == "AVX2", reason="this CPU's own kernels are the AVX2 ones"
)
def test_a_window_on_another_kernel_path_keeps_its_decisions_and_its_floats_within_the_audits_tolerance(tmp_path):
    own, avx2 = _run(tmp_path, None), _run(tmp_path, "avx2")
    assert own["capability"] != avx2["capability"] == "AVX2"
    pd.testing.assert_frame_equal(own["critical"], avx2["critical"], check_exact=True)  # decisions: exactly
    scan_a, scan_b = own["critical_scan"], avx2["critical_scan"]
    pd.testing.assert_frame_equal(scan_a, scan_b, check_exact=True)  # the KS p-values too
    for name in ("distance", "separability", "gradient", "sink"):
        largest, failures = shipping.compare_tables(own[name], avx2[name], **shipping.tolerance(name, False))
        assert not failures, (name, failures[:3])
