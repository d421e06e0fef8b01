"""Hidden checks for notebook 07 (teacher-forced training). Nothing here trains a real model:
a few steps on tiny synthetic data, compared with the reference."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from .. import nb07_training as ref
from ..nb04_masking import make_causal_mask
from ..nb06_transformer import Transformer
from . import (
    assert_matches,
    construct,
    generator,
    guarded,
    randn,
    record,
    reference_for,
    student_name,
    upstream_from,
)

SECTION_TF = "see section 2, 'Teacher forcing'"
SECTION_LR = "see section 3, 'The learning-rate schedule'"
SECTION_LS = "see section 4, 'Label smoothing'"
SECTION_LOOP = "see section 5, 'One epoch of training'"
SECTION_DECODE = "see section 6, 'Greedy decoding'"
PAD, BOS, EOS = 0, 2, 3


upstream = upstream_from(ref)


def _targets(gen: torch.Generator, lengths: list[int], vocab: int = 20) -> torch.Tensor:
    """``(B, max+2)``: ``<bos> y <eos> <pad>..`` rows with the given numbers of words."""
    rows = torch.full((len(lengths), max(lengths) + 2), PAD)
    for i, n in enumerate(lengths):
        rows[i, 0] = BOS
        rows[i, 1:n + 1] = torch.randint(4, vocab, (n,), generator=gen)
        rows[i, n + 1] = EOS
    return rows


def check_shift_right(ns: dict[str, Any]) -> None:
    shift_right = student_name(ns, "shift_right")
    gen = generator(701)
    for lengths, bos in [([3, 1, 4], BOS), ([1], 7), ([5, 5], 1)]:
        tgt = _targets(gen, lengths)[:, 1:]  # y <eos> <pad>.. without <bos>
        expected = ref.shift_right(tgt, bos)
        mistakes = {
            f"shifts left (drops the first token) instead of right ({SECTION_TF}).":
                torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], PAD)], dim=1),
            f"bos_id is appended at the end; it goes in front, and the last token is dropped ({SECTION_TF}).":
                torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos)], dim=1),
            f"the last token is kept, so the output is one longer than the input ({SECTION_TF}).":
                torch.cat([torch.full_like(tgt[:, :1], bos), tgt], dim=1),
            f"the first token is replaced by bos_id instead of shifting ({SECTION_TF}).":
                torch.cat([torch.full_like(tgt[:, :1], bos), tgt[:, 1:]], dim=1),
        }
        assert_matches(guarded(shift_right, "shift_right")(tgt.clone(), bos), expected,
                       f"shift_right(tgt {tuple(tgt.shape)}, bos_id={bos})", mistakes)


def check_make_teacher_forcing_batch(ns: dict[str, Any]) -> None:
    fn = student_name(ns, "make_teacher_forcing_batch")
    gen = generator(702)
    for lengths in ([3, 1, 4], [1], [2, 6]):
        tgt = _targets(gen, lengths)
        result = fn(tgt.clone(), PAD)
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise AssertionError("make_teacher_forcing_batch should return a pair (decoder_input, labels).")
        got_in, got_labels = result
        want_in, want_labels = ref.make_teacher_forcing_batch(tgt, PAD)
        what = f"make_teacher_forcing_batch(tgt {tuple(tgt.shape)})"
        if (isinstance(got_in, torch.Tensor) and isinstance(got_labels, torch.Tensor)
                and torch.equal(got_in, want_labels) and torch.equal(got_labels, want_in)):
            raise AssertionError(f"{what}: decoder_input and labels are swapped; the decoder reads "
                                 f"tgt[:, :-1] and predicts tgt[:, 1:] ({SECTION_TF}).")
        assert_matches(got_in, want_in, f"{what}: decoder_input", {
            f"decoder_input is the whole target; drop its last token, tgt[:, :-1] ({SECTION_TF}).": tgt,
            f"decoder_input starts after <bos>: it must start WITH <bos>, tgt[:, :-1] ({SECTION_TF}).": tgt[:, 1:],
        })
        assert_matches(got_labels, want_labels, f"{what}: labels", {
            "labels equal the decoder input (no shift): the label at position t is the NEXT token, "
            f"tgt[:, 1:] ({SECTION_TF}).": tgt[:, :-1],
            f"labels are the whole target; drop <bos>, tgt[:, 1:] ({SECTION_TF}).": tgt,
        })


def _noam_mistakes(step: int, d_model: int, warmup: int) -> dict[str, float | None]:
    return {
        "uses max instead of min: the rate is the SMALLER of the warm-up line and the 1/sqrt(step) "
        f"decay ({SECTION_LR}).": d_model**-0.5 * max(step**-0.5, step * warmup**-1.5),
        f"counts steps from 0 (uses step - 1); step counts from 1 ({SECTION_LR}).":
            ref.noam_lr(step - 1, d_model, warmup) if step > 1 else None,
        f"the d_model^-0.5 factor is missing ({SECTION_LR}).": min(step**-0.5, step * warmup**-1.5),
        f"the warm-up term uses warmup_steps^-0.5 instead of ^-1.5 ({SECTION_LR}).":
            d_model**-0.5 * min(step**-0.5, step * warmup**-0.5),
    }


def check_noam_lr(ns: dict[str, Any]) -> None:
    noam_lr = guarded(student_name(ns, "noam_lr"), "noam_lr")
    for d_model, warmup in [(512, 4000), (256, 100), (64, 1)]:
        steps = sorted({1, 2, 10, max(1, warmup - 1), warmup, warmup + 1, 3 * warmup, 100_000})
        got = {}
        for step in steps:
            value = noam_lr(step, d_model, warmup)
            if not isinstance(value, int | float) and not (isinstance(value, torch.Tensor) and value.numel() == 1):
                raise AssertionError(f"noam_lr(step={step}, d_model={d_model}, warmup_steps={warmup}) should return "
                                     f"a number, got {type(value).__name__}.")
            got[step] = float(value)
        wrong = [s for s in steps if not math.isclose(got[s], ref.noam_lr(s, d_model, warmup), rel_tol=1e-6)]
        if not wrong:
            for step in steps:
                record(f"noam_lr({step}, {d_model}, {warmup})", got[step], {"rtol": 1e-6, "atol": 0.0})
            continue
        where = f"noam_lr(step, d_model={d_model}, warmup_steps={warmup})"
        # Name a mistake only if it explains every step (some agree with the right rate on part of the curve).
        for description in _noam_mistakes(1, d_model, warmup):
            values = {s: _noam_mistakes(s, d_model, warmup)[description] for s in steps}
            if all(v is None or math.isclose(got[s], v, rel_tol=1e-6) for s, v in values.items()) and any(
                    values[s] is not None for s in wrong):
                raise AssertionError(f"{where}: {description}")
        step = wrong[0]
        expected = ref.noam_lr(step, d_model, warmup)
        raise AssertionError(f"{where} at step={step} = {got[step]:.6g}, relative error "
                             f"{abs(got[step] - expected) / expected:.2g}. Expected "
                             f"d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5) ({SECTION_LR}).")


def check_LabelSmoothingLoss(ns: dict[str, Any]) -> None:  # noqa: N802 (SPEC name)
    cls = student_name(ns, "LabelSmoothingLoss")
    gen = generator(704)
    for shape, vocab, smoothing, ignore in [((12,), 7, 0.1, 0), ((3, 5), 11, 0.2, 0), ((2, 4), 5, 0.0, 1),
                                            ((6,), 9, 0.3, -100)]:
        loss_fn = construct(cls, "LabelSmoothingLoss", smoothing, ignore)
        logits = randn(*shape, vocab, gen=gen, dtype=torch.float64).requires_grad_()
        target = torch.randint(0, vocab, shape, generator=gen)
        flat = target.reshape(-1)
        if ignore >= 0:
            flat[::3] = ignore  # some ignored positions (padding)
            target = flat.reshape(shape)
        flat_logits = logits.reshape(-1, vocab)
        expected = F.cross_entropy(flat_logits, flat, label_smoothing=smoothing, ignore_index=ignore)
        keep = flat != ignore
        logp = F.log_softmax(flat_logits, -1)
        nll = -logp.gather(1, flat.clamp(min=0)[:, None]).squeeze(1)
        others = (-(logp.sum(-1)) - nll) / (vocab - 1)
        no_pad = (-(logp.sum(-1)) - (-logp[:, ignore] if ignore >= 0 else 0)) / (vocab - (ignore >= 0))
        def mean(v: torch.Tensor, keep: torch.Tensor = keep) -> torch.Tensor:
            return (v * keep).sum() / keep.sum()
        what = f"LabelSmoothingLoss({smoothing}, ignore_index={ignore}) on logits {tuple(logits.shape)}"
        with torch.no_grad():
            mistakes = {
                f"padding targets are not ignored: average over the non-ignored targets only ({SECTION_LS}).":
                    F.cross_entropy(flat_logits, flat.clamp(min=0), label_smoothing=smoothing) if keep.any() else None,
                "the sum over targets is divided by ALL positions, padding included; divide by the number of "
                f"non-ignored targets ({SECTION_LS}).": ((1 - smoothing) * nll + smoothing * (-logp.mean(-1)))
                    .mul(keep).sum() / flat.numel(),
                "smoothing is spread over the V-1 wrong classes only; F.cross_entropy spreads it over all V "
                f"classes, the true one included ({SECTION_LS}).": mean((1 - smoothing) * nll + smoothing * others)
                    if smoothing else None,
                f"smoothing is not spread over the padding class; spread it over all V classes, as F.cross_entropy(label_smoothing=...) does ({SECTION_LS}).":
                    mean((1 - smoothing) * nll + smoothing * no_pad) if smoothing and ignore >= 0 else None,
                f"the smoothing term is missing: that is plain cross-entropy ({SECTION_LS}).":
                    F.cross_entropy(flat_logits, flat, ignore_index=ignore) if smoothing else None,
                f"the loss is summed, not averaged over targets ({SECTION_LS}).": expected * keep.sum(),
            }
        got = guarded(loss_fn, "LabelSmoothingLoss.forward")(logits, target)
        assert_matches(got, expected.detach(), what, {k: v for k, v in mistakes.items() if v is not None})
        got.backward()
        grad = logits.grad.clone()
        logits.grad = None
        expected.backward()
        assert_matches(grad, logits.grad, f"{what}: gradient with respect to the logits")


class _Recorder(torch.nn.Module):
    """A tiny translation model that records what it is fed (a stand-in for Transformer)."""

    def __init__(self, vocab: int, pad_id: int):
        super().__init__()
        self.pad_id = pad_id
        self.embed = torch.nn.Embedding(vocab, 8)
        self.out = torch.nn.Linear(8, vocab)
        self.calls: list[tuple[torch.Tensor, torch.Tensor, bool]] = []

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        self.calls.append((src.clone(), tgt.clone(), self.training))
        context = self.embed(src).mean(dim=1, keepdim=True)  # (B, 1, 8)
        return self.out(torch.tanh(self.embed(tgt) + context))  # (B, T, V)


class _Counting(torch.optim.SGD):
    def __init__(self, params, lr: float):
        super().__init__(params, lr=lr)
        self.grads: list[list[torch.Tensor]] = []
        self.zero_grad_calls = 0

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.zero_grad_calls += 1
        super().zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        self.grads.append([None if p.grad is None else p.grad.clone()
                           for group in self.param_groups for p in group["params"]])
        return super().step(closure)


def _loader(gen: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Three batches of different sizes and numbers of target tokens."""
    batches = []
    for lengths in ([3, 1, 4], [6], [2, 2, 5, 1]):
        tgt = _targets(gen, lengths, vocab=12)
        src = _targets(gen, [n + 1 for n in lengths], vocab=12)[:, 1:]
        batches.append((src, tgt))
    return batches


def check_train_epoch(ns: dict[str, Any]) -> None:
    train_epoch = guarded(student_name(ns, "train_epoch"), "train_epoch")
    gen = generator(705)
    batches = _loader(gen)
    torch.manual_seed(0)
    model = _Recorder(12, PAD).double()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = _Counting(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    loss_fn = ref.LabelSmoothingLoss(0.1, PAD)
    model.eval()  # train_epoch must switch to training mode itself
    with reference_for(ns, **upstream("make_teacher_forcing_batch", "shift_right")):
        got = train_epoch(model, batches, optimizer, scheduler, loss_fn, torch.device("cpu"))
    # The reference, replayed on a fresh copy with the same batches, without clipping.
    twin = _Recorder(12, PAD).double()
    twin.load_state_dict(initial)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    twin_sched = torch.optim.lr_scheduler.LambdaLR(twin_opt, lambda step: 1.0 / (step + 1))
    expected_grads = []
    total, tokens = 0.0, 0
    for src, tgt in batches:
        dec_in, labels = ref.make_teacher_forcing_batch(tgt, PAD)
        loss = loss_fn(twin(src, dec_in), labels)
        twin_opt.zero_grad()
        loss.backward()
        expected_grads.append([p.grad.clone() for p in twin.parameters()])
        twin_opt.step()
        twin_sched.step()
        n = int((labels != PAD).sum())
        total, tokens = total + loss.item() * n, tokens + n
    if len(model.calls) != len(batches):
        raise AssertionError(f"the model was called {len(model.calls)} times for {len(batches)} batches; "
                             f"call it once per batch ({SECTION_LOOP}).")
    for (src, tgt), (got_src, got_in, training) in zip(batches, model.calls, strict=True):
        if not training:
            raise AssertionError(f"the model ran in eval() mode: call model.train() at the start ({SECTION_LOOP}).")
        if not torch.equal(got_src, src):
            raise AssertionError(f"the model's first argument should be the batch's source tokens ({SECTION_LOOP}).")
        want_in = tgt[:, :-1]
        if not torch.equal(got_in, want_in):
            if torch.equal(got_in, tgt):
                raise AssertionError("the decoder is fed the whole target; feed tgt[:, :-1] "
                                     f"(make_teacher_forcing_batch) so that it predicts tgt[:, 1:] ({SECTION_LOOP}).")
            raise AssertionError(f"the decoder input should be tgt[:, :-1] for a batch tgt {tuple(tgt.shape)}, "
                                 f"got a tensor of shape {tuple(got_in.shape)} ({SECTION_LOOP}).")
    if len(optimizer.grads) != len(batches):
        raise AssertionError(f"optimizer.step() ran {len(optimizer.grads)} times for {len(batches)} batches; "
                             f"step once per batch ({SECTION_LOOP}).")
    if scheduler.last_epoch != len(batches):
        raise AssertionError(f"scheduler.step() ran {scheduler.last_epoch} times for {len(batches)} batches; "
                             f"step the learning-rate schedule once per batch, after optimizer.step() ({SECTION_LOOP}).")
    for index, (mine, want) in enumerate(zip(optimizer.grads, expected_grads, strict=True)):
        if any(g is None for g in mine):
            raise AssertionError(f"batch {index}: some parameters have no gradient at optimizer.step(): call "
                                 f"loss.backward() before optimizer.step() ({SECTION_LOOP}).")
        flat_mine = torch.cat([g.reshape(-1) for g in mine])
        flat_want = torch.cat([g.reshape(-1) for g in want])
        cosine = float(flat_mine @ flat_want / (flat_mine.norm() * flat_want.norm() + 1e-30))
        # Clipping rescales the gradient (allowed); accumulation or a wrong loss changes its direction.
        if cosine < 0.999 or flat_mine.norm() > flat_want.norm() * (1 + 1e-6):
            accumulated = torch.cat([sum(g[i] for g in expected_grads[:index + 1]).reshape(-1)
                                     for i in range(len(want))])
            if index and torch.allclose(flat_mine, accumulated, rtol=1e-6, atol=1e-9):
                raise AssertionError(f"gradients accumulate across batches: call optimizer.zero_grad() before "
                                     f"each loss.backward() ({SECTION_LOOP}).")
            raise AssertionError(f"batch {index}: the gradient at optimizer.step() is not that of the "
                                 f"teacher-forced loss loss_fn(logits, tgt[:, 1:]) ({SECTION_LOOP}).")
    if not isinstance(got, int | float) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
        raise AssertionError(f"train_epoch should return the mean loss as a number, got {type(got).__name__}.")
    got = float(got)
    expected = total / tokens
    if not math.isclose(got, expected, rel_tol=1e-5):
        raise AssertionError(
            f"train_epoch returned {got:.5g}; expected the mean loss PER TARGET TOKEN, {expected:.5g}: weight "
            f"each batch's mean loss by its number of non-pad labels ({SECTION_LOOP})."
        )
    record("train_epoch's mean loss", got, {"rtol": 1e-5, "atol": 0.0})


class _Scripted(torch.nn.Module):
    """A model whose greedy choice at step t is scripted per row, to test stopping and padding."""

    def __init__(self, script: torch.Tensor, pad_id: int, vocab: int = 10):
        super().__init__()
        self.script, self.pad_id, self.vocab = script, pad_id, vocab
        self.generator = torch.nn.Identity()

    def encode(self, src, src_mask):
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, tgt, memory, src_mask, tgt_mask):
        t = tgt.size(1)
        choice = self.script[:, min(t - 1, self.script.size(1) - 1)]
        logits = torch.full((tgt.size(0), t, self.vocab), -1.0)
        logits[:, -1].scatter_(1, choice[:, None], 1.0)
        return logits

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src, None), None, None)


class _Probe(torch.nn.Module):
    """A model whose next token depends on exactly what the masks let it see.

    Position t of the decoder sums the target tokens its mask row allows and the source tokens
    its source-mask row allows (each token weighted by its position), and the last position then
    sums what it may see of the other positions' sums: so a missing source padding mask, a
    missing or inverted causal mask change the chosen tokens. Tokens are picked by a hash of
    that number, never ``pad_id`` or ``<bos>``; ``forward`` builds the masks as the course's
    ``Transformer`` does.
    """

    def __init__(self, pad_id: int, bos_id: int, vocab: int = 13):
        super().__init__()
        self.pad_id, self.vocab = pad_id, vocab
        self.choices = torch.tensor([i for i in range(vocab) if i not in (pad_id, bos_id)])
        self.generator = torch.nn.Identity()

    @staticmethod
    def _allowed(mask: torch.Tensor | None, b: int, t: int, s: int) -> torch.Tensor:
        if mask is None:
            return torch.ones(b, t, s, dtype=torch.float64)
        m = mask if mask.dtype == torch.bool else mask != 0
        while m.dim() < 4:
            m = m.unsqueeze(0)
        return torch.broadcast_to(m, (b, m.size(1), t, s))[:, 0].to(torch.float64)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        return src.to(torch.float64)[..., None] + 0.5  # (B, S, 1): the tokens (<pad> included, nonzero)

    def decode(self, tgt, memory, src_mask, tgt_mask) -> torch.Tensor:
        b, t = tgt.shape
        s = memory.size(1)
        x = tgt.to(torch.float64) * 1.7 ** torch.arange(t, dtype=torch.float64)
        y = memory[..., 0] * 1.3 ** torch.arange(s, dtype=torch.float64)
        see_tgt, see_src = self._allowed(tgt_mask, b, t, t), self._allowed(src_mask, b, t, s)
        h = (see_tgt * x[:, None, :]).sum(-1) + (see_src * y[:, None, :]).sum(-1)  # (B, T)
        z = (see_tgt * (h * 1.1 ** torch.arange(t, dtype=torch.float64))[:, None, :]).sum(-1)  # (B, T)
        pick = ((torch.sin(z * 12.9898) * 43758.5453).remainder(1.0) * len(self.choices)).long()
        pick = pick.clamp(0, len(self.choices) - 1)
        return F.one_hot(self.choices[pick], self.vocab).to(torch.float32)  # (B, T, V) "logits"

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = ref.make_padding_mask(src, self.pad_id)
        return self.decode(tgt, self.encode(src, src_mask), src_mask, ref.make_decoder_mask(tgt, self.pad_id))


def _decode_with(model: torch.nn.Module, src: torch.Tensor, steps: int, src_mask, tgt_mask_of) -> torch.Tensor:
    """Greedy decoding of ``steps`` tokens with the given (wrong) masks, for naming mistakes."""
    memory = model.encode(src, src_mask)
    out = torch.full((src.size(0), 1), BOS)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(steps):
        nxt = model.generator(model.decode(out, memory, src_mask, tgt_mask_of(out))[:, -1]).argmax(-1)
        nxt = nxt.masked_fill(finished, PAD)
        out = torch.cat([out, nxt[:, None]], 1)
        finished |= nxt == EOS
    return out


def check_greedy_decode(ns: dict[str, Any]) -> None:
    greedy = guarded(student_name(ns, "greedy_decode"), "greedy_decode")
    # 1. Stopping and padding, with a scripted model.
    script = torch.tensor([[5, 6, EOS, 7, 8, 9], [5, EOS, 9, 9, 9, 9], [6, 6, 6, 6, 6, EOS]])
    model = _Scripted(script, pad_id=PAD)
    src = torch.ones(3, 4, dtype=torch.long)
    for max_len in (10, 5):
        expected = ref.greedy_decode(model, src, max_len, BOS, EOS)
        got = greedy(model, src, max_len, BOS, EOS)
        what = f"greedy_decode(max_len={max_len}) with rows ending after 3, 2 and 6 tokens"
        if isinstance(got, torch.Tensor) and got.dim() == 2 and got.size(1) == expected.size(1) + 1 and max_len == 5:
            raise AssertionError(f"{what}: max_len does not count <bos>: the output holds at most max_len tokens, "
                                 f"<bos> included ({SECTION_DECODE}).")
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and not torch.equal(got, expected):
            after_eos = (expected == PAD) & (got != PAD)
            if after_eos.any():
                raise AssertionError(f"{what}: positions after a row's <eos> should hold model.pad_id; "
                                     f"row {int(after_eos.nonzero()[0, 0])} keeps generating ({SECTION_DECODE}).")
        if (isinstance(got, torch.Tensor) and got.dim() == 2 and got.size(1) > expected.size(1)
                and torch.equal(got[:, :expected.size(1)], expected)):
            raise AssertionError(f"{what}: the output has {got.size(1)} columns, expected {expected.size(1)}: "
                                 f"stop as soon as every row has produced <eos> ({SECTION_DECODE}).")
        assert_matches(got, expected, what, hint=f"Column 0 is bos_id, then per step the argmax of the LAST position's "
                                                 f"logits ({SECTION_DECODE}).")
    # 2. A real (tiny, random) Transformer: the same tokens as the reference.
    gen = generator(706)
    torch.manual_seed(7)
    transformer = Transformer(11, 13, d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0, pad_id=PAD).eval()
    with torch.no_grad():
        for p in transformer.parameters():
            p.copy_(randn(*p.shape, gen=gen) * 0.5)
    src = torch.randint(4, 11, (4, 6), generator=gen)
    src[1, 4:] = PAD
    src[3, 2:] = PAD
    expected = ref.greedy_decode(transformer, src, 12, BOS, EOS)
    got = greedy(transformer, src, 12, BOS, EOS)
    no_mask = None
    if isinstance(got, torch.Tensor) and got.shape == expected.shape and not torch.equal(got, expected):
        with torch.no_grad():
            memory = transformer.encode(src, None)
            out = torch.full((4, 1), BOS)
            for _ in range(expected.size(1) - 1):
                nxt = transformer.generator(transformer.decode(out, memory, None, None)[:, -1]).argmax(-1)
                out = torch.cat([out, nxt[:, None]], 1)
            no_mask = out
    assert_matches(got, expected, "greedy_decode on a small random Transformer (src (4, 6) with padding)",
                   {f"the source padding mask is not used ({SECTION_DECODE}).": no_mask} if no_mask is not None else {},
                   hint=f"Encode once, then repeatedly decode the tokens so far with a causal mask and append the "
                        f"argmax of the LAST position's logits ({SECTION_DECODE}).")
    # 3. A probe whose tokens depend on every mask: source padding, causal, inverted.
    probe = _Probe(PAD, BOS)
    src = torch.tensor([[5, 6, 7, 8, 9, 10], [4, 9, 7, PAD, PAD, PAD], [11, 12, PAD, PAD, PAD, PAD]])
    expected = ref.greedy_decode(probe, src, 9, BOS, EOS)
    got = greedy(probe, src, 9, BOS, EOS)
    mistakes = {}
    if isinstance(got, torch.Tensor) and got.shape == expected.shape and not torch.equal(got, expected):
        steps = expected.size(1) - 1
        pad_mask = ref.make_padding_mask(src, PAD)
        causal = make_causal_mask
        mistakes = {
            f"the source padding mask is not passed to encode/decode: the decoder attends to <pad> source tokens "
            f"({SECTION_DECODE}).": _decode_with(probe, src, steps, None, lambda out: causal(out.size(1))),
            f"no causal mask when decoding the prefix: earlier positions see later ones, which changes the "
            f"last position's input in a deep model; pass make_decoder_mask(out, pad_id) ({SECTION_DECODE}).":
                _decode_with(probe, src, steps, pad_mask, lambda out: None),
            f"the causal mask is inverted (True must mean 'may attend') ({SECTION_DECODE}).":
                _decode_with(probe, src, steps, pad_mask, lambda out: ~causal(out.size(1))),
            f"no masks at all: neither source padding nor causal ({SECTION_DECODE}).":
                _decode_with(probe, src, steps, None, lambda out: None),
        }
    assert_matches(got, expected, "greedy_decode on a model whose tokens depend on its masks "
                   "(src (3, 6), rows 1-2 padded)", mistakes,
                   hint=f"Pass the source padding mask to encode and decode, and make_decoder_mask(out, pad_id) "
                        f"to decode ({SECTION_DECODE}).")


def _flat_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=PAD)


def copy_model(ns: dict[str, Any]) -> torch.nn.Module:
    """The notebook's copy-task model trained with the REFERENCE train_epoch, so that the
    greedy_decode test does not depend on the student's train_epoch."""
    torch.manual_seed(0)
    model = Transformer(12, 12, d_model=32, num_heads=4, num_layers=1, d_ff=64, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = _flat_cross_entropy
    batches = ns["copy_task_batches"]
    ref.train_epoch(model, batches(1), optimizer, None, loss_fn, "cpu", max_grad_norm=1.0)
    for epoch in range(3):
        ref.train_epoch(model, batches(60, seed=epoch + 1), optimizer, None, loss_fn, "cpu", max_grad_norm=1.0)
    return model
