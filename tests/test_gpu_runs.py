"""The GPU figures of docs/benchmarks.md are those of the run kept in docs/runs/, and the script that
made them still runs (on the CPU, with the one-minute configuration)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUN = ROOT / "docs" / "runs" / "2026-11-27-h100"


def _docs() -> str:
    return " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())


def test_the_time_to_quality_section_quotes_its_run():
    record = json.loads((RUN / "speed.json").read_text())
    fp16 = json.loads((RUN / "speed_fp16.json").read_text())["variants"][0]
    notebook, compiled = record["variants"]
    decoders = notebook["decoders"]
    second = json.loads((RUN / "speed_compile.json").read_text())["variants"][0]  # the run with the recompile log
    log = (RUN / "compile.log").read_text()
    auto = re.findall(r"^  compiled_auto: +([\d.]+) s, step +\d+", log, re.MULTILINE)
    assert "512*src.size()[0]*tgt.size()[1] >= 5242880" in log and len(auto) >= 2
    docs = _docs()
    assert record["device"] in docs and record["torch"] in docs
    expected = [
        f"| {notebook['reached']['seconds']} s of training (step {notebook['reached']['steps']:,}) "
        f"| {notebook['tokens_per_s']:,} | {round(notebook['flops_per_token'] / 1e6)} MFLOP per token, "
        f"{notebook['tflops']} TFLOP/s: {notebook['tflops'] / record['peak_tflops']:.1%} of the bf16 peak as sold "
        f"({record['peak_tflops']} TFLOP/s), {notebook['tflops'] / record['matmul_tflops']:.1%} of what an 8192³ "
        f"bf16 product reached in the same run ({round(record['matmul_tflops'])} TFLOP/s) "
        f"| {notebook['peak_memory_gib']} GiB |",
        f"38 BLEU after {notebook['reached']['seconds'] / 60:.1f} minutes of training on an H100",
        f"not reached: {compiled['steps']} steps in {compiled['train_seconds']} s | {compiled['tokens_per_s']:,} "
        f"| the first step (the compile) took {compiled['first_step_s']} s",
        f"With `dynamic=True` one compile took {second['first_step_s']} s",
        f"the first compile took {auto[0]} s, and the model compiled again at the first batch of another size "
        f"(step 2, at {auto[1]} s)",
        f"{fp16['train_seconds']} s, step {fp16['history'][-1]['steps']}, validation BLEU "
        f"{fp16['history'][-1]['val_bleu']}",
        f"(test BLEU {decoders['greedy_test_bleu']} greedy, {decoders['beam4_test_bleu']} beam 4)",
        f"took {decoders['greedy_200_s']} s without the key/value cache and {decoders['greedy_cached_200_s']} s "
        "with it",
        f"took {decoders['greedy_test_s']} s greedy and {decoders['beam4_test_s']} s with beam 4 "
        f"({decoders['beam4_test_s'] / decoders['greedy_test_s']:.1f}x)",
    ]
    for text in expected:
        assert text in docs, text
    # the bf16 loop's figure beside the fp16 row: its last evaluation within the fp16 run's time
    bf16 = max((h for h in notebook["history"] if h["seconds"] <= fp16["train_seconds"]), key=lambda h: h["seconds"])
    assert f"(the bf16 loop: {bf16['val_bleu']} at step {bf16['steps']}, {bf16['seconds']} s)" in docs


def test_gpu_speed_runs_and_records_what_the_docs_quote(tmp_path, local_multi30k):
    """The tiny configuration on the CPU, a few seconds: the record has every field the docs read."""
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_speed.py"), "--config", "tiny", "--variants",
                          "notebook", "--cap", "3", "--first-eval", "1.5", "--every", "1.5", "--target", "99",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads((tmp_path / "gpu_speed.json").read_text())
    row = record["variants"][0]
    assert row["variant"] == "notebook" and row["reached"] is None  # BLEU 99 is out of reach
    assert row["steps"] > 0 and row["tokens_per_s"] > 0 and row["flops_per_token"] > 1e5
    assert [h["seconds"] for h in row["history"]] == sorted(h["seconds"] for h in row["history"])
    assert set(row["decoders"]) == {"greedy_200_s", "greedy_cached_200_s", "greedy_test_s", "beam4_test_s",
                                    "greedy_test_bleu", "beam4_test_bleu"}
