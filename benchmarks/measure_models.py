"""Measure the pretrained-model layer: first and cached load time, and one capture's time and peak RSS.

    .venv/bin/python benchmarks/measure_models.py [--model fallback] [--seq-len 1024]

Each measurement runs in a fresh Python process (so imports, caches and memory start from zero):

1. first load: ``attnlimits.models.load`` with an empty temporary ``ATTNLIMITS_CACHE`` (for the fallback: parse and
   dequantise the GGUF, write the safetensors cache);
2. cached load: the same, once the cache exists;
3. capture: one ``attnlimits.models.capture`` of ``--seq-len`` tokens of the text's first window; its wall time,
   the process's peak RSS during the capture (sampled every 5 ms) and ``ru_maxrss`` of the whole process.

Every number printed is measured by this run. Use ``--cache DIR`` to measure against an existing cache instead of a
fresh temporary one (then the "first" load is only a first load if DIR is empty).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def _child(kind: str, model_name: str, seq_len: int) -> dict:
    import resource

    started = time.perf_counter()
    import attnlimits as al

    loaded = al.models.load(model_name)
    result = {
        "load_seconds_wall": time.perf_counter() - started,
        "load_seconds_reported": loaded.provenance.load_seconds,
        "source": loaded.provenance.source,
        "model": loaded.provenance.model_id,
    }
    if kind == "capture":
        text = al.texts.load()
        ids = al.models.windows.windows(loaded, text, seq_len, 1)
        m = al.models.measure_capture(loaded, ids)
        result.update(
            text=text.provenance.title,
            seq_len=m["seq_len"],
            capture_seconds=m["seconds"],
            capture_peak_rss_gb=m["peak_rss_gb"],
            rss_before_capture_gb=m["rss_before_gb"],
            captured_gb=m["captured_gb"],
            process_max_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
        )
    return result


def _run(kind: str, model_name: str, seq_len: int, cache: str) -> dict:
    env = dict(os.environ, ATTNLIMITS_CACHE=cache)
    command = [sys.executable, __file__, "--child", kind, "--model", model_name, "--seq-len", str(seq_len)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} run failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("ATTNLIMITS_MODEL", "fallback"))
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--cache", default=None, help="cache directory (default: a fresh temporary one)")
    parser.add_argument("--child", choices=["load", "capture"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.model, args.seq_len)))
        return

    with tempfile.TemporaryDirectory(prefix="attnlimits-bench-") as tmp:
        cache = args.cache or tmp
        first = _run("load", args.model, args.seq_len, cache)
        cached = _run("load", args.model, args.seq_len, cache)
        cap = _run("capture", args.model, args.seq_len, cache)
    print(f"model: {first['model']} [{first['source']}]; text: {cap['text']}; {os.cpu_count()} CPUs")
    rows = [
        ("first load (empty cache), wall incl. imports", f"{first['load_seconds_wall']:.1f} s"),
        ("first load, as load() reports it", f"{first['load_seconds_reported']:.1f} s"),
        ("cached load, wall incl. imports", f"{cached['load_seconds_wall']:.1f} s"),
        ("cached load, as load() reports it", f"{cached['load_seconds_reported']:.1f} s"),
        (f"capture at L = {cap['seq_len']}", f"{cap['capture_seconds']:.1f} s"),
        ("peak RSS during the capture", f"{cap['capture_peak_rss_gb']:.2f} GB"),
        ("RSS before the capture", f"{cap['rss_before_capture_gb']:.2f} GB"),
        ("tensors held by the capture", f"{cap['captured_gb']:.2f} GB"),
        ("process max RSS (ru_maxrss)", f"{cap['process_max_rss_gb']:.2f} GB"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


if __name__ == "__main__":
    main()
