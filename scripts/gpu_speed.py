"""Time to quality for notebook 07's `gpu` configuration, and what the speed levers give.

    python scripts/gpu_speed.py [--variants notebook,compiled,fp16] [--cap NAME=SECONDS ...] [--target 38]

Each variant trains a fresh model (seed 0) of 07's configuration with the course's own modules
(notebook 06's Transformer, notebook 07's reference loss, schedule and decoding) and measures, with
the clock paused while it evaluates (as the notebook does):

- the training time at which the validation BLEU (greedy, cased, sacreBLEU) first reaches ``--target``;
- target tokens per second (padding excluded), and the model math the GPU executed per second
  (PyTorch's flop counter on sampled batches, padding included) against the card's bf16 peak, both as
  sold and as a large matrix product reaches it in this run;
- peak GPU memory (PyTorch's allocator).

Variants: ``notebook`` (the notebook's loop: bf16 autocast, host syncs at each step), ``compiled``
(``torch.compile(model, dynamic=True)``, its compile time counted as training time; fused Adam; the
loss summed on the GPU and read once per evaluation), ``compiled_auto`` (the same with the default
``dynamic=None``), ``fp16`` (float16 autocast with a gradient scaler: the path of
a GPU without bfloat16, such as Colab's T4). After the first variant the script also times section
13's decoders (greedy with and without the key/value cache) and beam search against greedy. A row
goes to stdout and all figures to ``--out``/gpu_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace  # noqa: F401  (the notebook's Config cell uses them)
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "course" / "07_training"), str(ROOT / "autograder" / "reference")]
os.environ.setdefault("TQDM_DISABLE", "1")  # the notebook's translate draws a bar per call: not in a log

import multi30k  # noqa: E402
import torch  # noqa: E402
from course_blocks import Transformer, make_padding_mask, scaled_dot_product_attention, split_heads  # noqa: E402
from course_reference.nb07_training import (  # noqa: E402
    LabelSmoothingLoss,
    beam_search,
    greedy_decode,
    make_teacher_forcing_batch,
    noam_lr,
)
from torch import nn  # noqa: E402

NOTEBOOK = ROOT / "solutions" / "07_training.ipynb"
# Dense bf16 tensor-core peaks as sold (TFLOP/s, no sparsity): NVIDIA's data sheets.
PEAKS = {"H100": 989.4, "H200": 989.4, "A100": 312.0, "L4": 121.0, "T4": 65.0}


def notebook_cell(marker: str, end: str | None = None) -> str:
    """The source of the solution notebook's code cell holding ``marker``, cut before ``end``."""
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and marker in source:
            return source[source.index(marker):source.index(end)] if end else source
    raise LookupError(f"no code cell of {NOTEBOOK.name} holds {marker!r}")


def configs() -> dict:
    """The notebook's own configuration table (one copy of it: the notebook's)."""
    namespace = {"dataclass": dataclass, "replace": replace, "os": os, "torch": torch}
    exec(notebook_cell("@dataclass(frozen=True)\nclass Config", "GRADING ="), namespace)
    return namespace["CONFIGS"]


def greedy_decode_cached():
    """Section 13's cached greedy decoder, from the notebook."""
    namespace = {"torch": torch, "make_padding_mask": make_padding_mask, "split_heads": split_heads,
                 "scaled_dot_product_attention": scaled_dot_product_attention}
    exec("import torch\n" + notebook_cell("@torch.no_grad()\ndef greedy_decode_cached", "\nif not GRADING"),
         namespace)
    return namespace["greedy_decode_cached"]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_tflops(device: torch.device, size: int = 8192) -> float | None:
    """What one large bf16 matrix product reaches on this card now (TFLOP/s), the mean of 10."""
    if device.type != "cuda":
        return None
    a, b = (torch.randn(size, size, device=device, dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    synchronize(device)
    begin = time.perf_counter()
    for _ in range(10):
        a @ b
    synchronize(device)
    return 10 * 2 * size**3 / (time.perf_counter() - begin) / 1e12


def flops_per_token(model, loader, loss_fn, device, amp_dtype, batches: int = 12) -> float:
    """Forward and backward FLOPs the model executes per real target token (padding included in the
    work, excluded from the tokens), counted by PyTorch on the first ``batches`` batches."""
    from torch.utils.flop_counter import FlopCounterMode

    flops = tokens = 0
    for index, (src, tgt) in enumerate(loader):
        if index == batches:
            break
        src, tgt = src.to(device), tgt.to(device)
        decoder_input, labels = make_teacher_forcing_batch(tgt, model.pad_id)
        with FlopCounterMode(display=False) as counter:
            with torch.autocast(device.type, dtype=amp_dtype, enabled=device.type == "cuda"):
                logits = model(src, decoder_input)
            loss_fn(logits.float(), labels).backward()
        model.zero_grad(set_to_none=True)
        flops += counter.get_total_flops()
        tokens += int((labels != model.pad_id).sum())
    return flops / tokens


def notebook_translate(tokenizer, device: torch.device, config):
    """The notebook's own ``translate`` (greedy by default, sorted by length, bf16 where the GPU has it),
    bound to this run's tokenizer, device and configuration."""
    from tqdm.auto import tqdm

    bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported(False)
    namespace = {"torch": torch, "multi30k": multi30k, "tqdm": tqdm, "greedy_decode": greedy_decode,
                 "BOS_ID": multi30k.BOS_ID, "EOS_ID": multi30k.EOS_ID, "tokenizer": tokenizer, "device": device,
                 "CONFIG": config, "autocast": lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)}
    exec(notebook_cell("def translate(", "\n\n@torch.no_grad()\ndef validation_loss"), namespace)
    return namespace["translate"]


def run(variant: str, config, data, device, cap: float, target: float, first_eval: float, every: float) -> dict:
    """Train one variant until the validation BLEU reaches ``target`` or ``cap`` seconds of training pass."""
    translate, train_loader, val_de, val_en = data
    torch.manual_seed(0)
    model = Transformer(config.vocab_size, config.vocab_size, d_model=config.d_model, num_heads=config.num_heads,
                        num_layers=config.num_layers, d_ff=config.d_ff, dropout=config.dropout,
                        pad_id=multi30k.PAD_ID, tie_embeddings=config.tie_embeddings).to(device)
    fast = variant.startswith("compiled")
    amp_dtype = torch.float16 if variant == "fp16" else torch.bfloat16
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                                 **({"fused": True} if fast and device.type == "cuda" else {}))
    scale = config.peak_lr / noam_lr(config.warmup_steps, config.d_model, config.warmup_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: scale * noam_lr(step + 1, config.d_model, config.warmup_steps))
    scaler = torch.amp.GradScaler(device.type, enabled=variant == "fp16")
    loss_fn = LabelSmoothingLoss(0.1, ignore_index=multi30k.PAD_ID)
    forward, compile_note = model, ""
    if fast:
        try:
            # compiled: shapes symbolic from the start; compiled_auto: PyTorch's default (the first
            # shape compiled as it is, the sizes that change made symbolic at the first recompile)
            forward = torch.compile(model, dynamic=True if variant == "compiled" else None)
        except Exception as error:  # noqa: BLE001  (a platform without a compiler: say so, train eagerly)
            compile_note = f"torch.compile failed ({type(error).__name__}: {error}); eager"
    enabled = device.type == "cuda"
    if enabled:
        torch.cuda.reset_peak_memory_stats(device)
    total = torch.zeros((), device=device)
    tokens = torch.zeros((), device=device, dtype=torch.long)
    history, reached, step, first_step = [], None, 0, None
    stream = (batch for _ in range(10**6) for batch in train_loader)
    trained, next_eval = 0.0, first_eval
    while trained < cap:
        synchronize(device)
        begin = time.monotonic()
        stop = begin + min(next_eval, cap) - trained
        while time.monotonic() < stop:
            src, tgt = next(stream)
            src, tgt = src.to(device, non_blocking=True), tgt.to(device, non_blocking=True)
            decoder_input, labels = make_teacher_forcing_batch(tgt, multi30k.PAD_ID)
            model.train()
            with torch.autocast(device.type, dtype=amp_dtype, enabled=enabled):
                logits = forward(src, decoder_input)
            loss = loss_fn(logits.float(), labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            real = (labels != multi30k.PAD_ID).sum()
            if fast:  # summed on the GPU, read once per evaluation
                total += loss.detach() * real
                tokens += real
            else:  # the notebook's loop: loss.item() twice (train_epoch, the Recorder) and int(real)
                count = int(real)
                total += loss.item() * count
                tokens += count
                loss.item()
            step += 1
            if first_step is None:
                synchronize(device)
                first_step = time.monotonic() - begin
        synchronize(device)
        trained += time.monotonic() - begin
        bleu = multi30k.bleu(translate(model, val_de), val_en)["cased"].score
        history.append({"seconds": round(trained, 1), "steps": step, "val_bleu": round(bleu, 2)})
        print(f"  {variant}: {trained:6.1f} s, step {step:5d}, val BLEU {bleu:5.2f}", flush=True)
        if bleu >= target:
            reached = history[-1]
            break
        next_eval = trained + every
    done = int(tokens)
    row = {"variant": variant, "reached": reached, "target": target, "history": history, "steps": step,
           "train_seconds": round(trained, 1), "target_tokens": done, "tokens_per_s": round(done / trained),
           "first_step_s": round(first_step or 0.0, 1), "compile": compile_note or ("torch.compile" if fast else ""),
           "mean_train_loss": round(float(total) / max(done, 1), 3)}
    if enabled:
        row["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    row["flops_per_token"] = flops_per_token(model, train_loader, loss_fn, device, amp_dtype)
    row["tflops"] = round(row["flops_per_token"] * row["tokens_per_s"] / 1e12, 1)
    return row, model


def decoders(model, translate, tokenizer, test_de, device) -> dict:
    """Section 13 (greedy with and without the cache, 200 sentences, 60 tokens) and beam 4 against
    greedy over the whole test split, each after a warm-up call, the GPU's queue drained around it."""
    cached = greedy_decode_cached()
    batch = multi30k.pad([ids + [multi30k.EOS_ID] for ids in tokenizer.encode(test_de[:200])]).to(device)
    out = {}
    for label, decode in (("greedy", greedy_decode), ("greedy_cached", cached)):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            decode(model, batch[:8], max_len=60, bos_id=multi30k.BOS_ID, eos_id=multi30k.EOS_ID)
            synchronize(device)
            begin = time.perf_counter()
            decode(model, batch, max_len=60, bos_id=multi30k.BOS_ID, eos_id=multi30k.EOS_ID)
            synchronize(device)
        out[f"{label}_200_s"] = round(time.perf_counter() - begin, 3)
    for label, decode in (("greedy", greedy_decode), ("beam4", partial(beam_search, beam_size=4, length_penalty=0.6))):
        translate(model, test_de[:16], decode=decode)
        synchronize(device)
        begin = time.perf_counter()
        out[f"{label}_test"] = translate(model, test_de, decode=decode)
        synchronize(device)
        out[f"{label}_test_s"] = round(time.perf_counter() - begin, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="notebook,compiled,fp16")
    parser.add_argument("--config", default="gpu", help="07's configuration (default gpu; tiny to try the script)")
    parser.add_argument("--cap", action="append", default=[], metavar="[NAME=]SECONDS",
                        help="most training seconds per variant (default 180)")
    parser.add_argument("--target", type=float, default=38.0, help="validation BLEU to reach (default 38)")
    parser.add_argument("--first-eval", type=float, default=45.0, help="training seconds before the first evaluation")
    parser.add_argument("--every", type=float, default=10.0, help="training seconds between evaluations")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu")
    args = parser.parse_args(argv)
    caps = dict(item.split("=", 1) if "=" in item else ("*", item) for item in args.cap)
    config = configs()[args.config]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    began = time.monotonic()
    report = {"device": card, "torch": torch.__version__, "config": asdict(config), "variants": []}
    report["matmul_tflops"] = matmul_tflops(device)
    report["peak_tflops"] = next((peak for key, peak in PEAKS.items() if key in card), None)
    print(f"{card}, torch {torch.__version__}: a 8192^3 bf16 product runs at {report['matmul_tflops'] or 0:.0f} "
          f"TFLOP/s (sold as {report['peak_tflops']})", flush=True)

    train_de, train_en = multi30k.load_split("train")
    val_de, val_en = multi30k.load_split("val")
    test_de, test_en = multi30k.load_split("test_2016_flickr")
    if config.train_pairs:
        train_de, train_en = train_de[: config.train_pairs], train_en[: config.train_pairs]
    if config.eval_pairs:
        val_de, val_en = val_de[: config.eval_pairs], val_en[: config.eval_pairs]
        test_de, test_en = test_de[: config.eval_pairs], test_en[: config.eval_pairs]
    os.environ.setdefault("HOME", str(args.out))
    tokenizer = multi30k.train_tokenizer(train_de + train_en, vocab_size=config.vocab_size, model_type="bpe")
    train_loader = multi30k.BatchLoader(multi30k.encode_pairs(tokenizer, train_de, train_en),
                                        max_tokens=config.batch_tokens, shuffle=True)
    translate = notebook_translate(tokenizer, device, config)
    data = (translate, train_loader, val_de, val_en)
    print(f"data and tokenizer: {time.monotonic() - began:.0f} s; {len(train_loader)} batches per epoch", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for index, variant in enumerate(args.variants.split(",")):
        train_loader.epoch = 0  # every variant sees the same batches in the same order
        cap = float(caps.get(variant, caps.get("*", 180)))
        try:
            row, model = run(variant, config, data, device, cap, args.target, args.first_eval, args.every)
        except Exception as error:  # noqa: BLE001  (one variant's failure must not lose the others' figures)
            row, model = {"variant": variant, "error": f"{type(error).__name__}: {error}"}, None
        peak = report["peak_tflops"]
        if "error" not in row:
            reached = row["reached"]
            print(f"{variant}: val BLEU {args.target:g} " + (f"after {reached['seconds']} s of training (step "
                  f"{reached['steps']})" if reached else f"not reached in {row['train_seconds']} s (last "
                  f"{row['history'][-1]['val_bleu']})") + f"; {row['tokens_per_s']:,} target tokens/s, "
                  f"{row['flops_per_token'] / 1e6:.0f} MFLOP per token, {row['tflops']} TFLOP/s"
                  + (f" ({row['tflops'] / peak:.1%} of the sold peak, {row['tflops'] / report['matmul_tflops']:.1%}"
                     " of the large product)" if peak and report["matmul_tflops"] else "")
                  + f"; peak memory {row.get('peak_memory_gib', '-')} GiB; first step {row['first_step_s']} s"
                  + (f"; {row['compile']}" if row["compile"] else ""), flush=True)
        else:
            print(f"{variant}: FAILED {row['error']}", flush=True)
        if index == 0 and model is not None:
            timing = decoders(model, translate, tokenizer, test_de, device)
            greedy = multi30k.bleu(timing.pop("greedy_test"), test_en)["cased"].score
            beam = multi30k.bleu(timing.pop("beam4_test"), test_en)["cased"].score
            timing.update(greedy_test_bleu=round(greedy, 2), beam4_test_bleu=round(beam, 2))
            row["decoders"] = timing
            print(f"section 13, 200 sentences: greedy {timing['greedy_200_s']} s, with the cache "
                  f"{timing['greedy_cached_200_s']} s; test_2016_flickr: greedy {timing['greedy_test_s']} s "
                  f"(BLEU {greedy:.2f}), beam 4 {timing['beam4_test_s']} s (BLEU {beam:.2f}): "
                  f"{timing['beam4_test_s'] / timing['greedy_test_s']:.1f}x", flush=True)
        report["variants"].append(row)
        (args.out / "gpu_speed.json").write_text(json.dumps(report, indent=1))
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    print(f"all done in {time.monotonic() - began:.0f} s; figures in {args.out / 'gpu_speed.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
