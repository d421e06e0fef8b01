"""Hidden checks for notebook 07 (teacher-forced training). Nothing here trains a real model:
a few steps on tiny synthetic data, compared with the reference."""

from __future__ import annotations

import copy
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
    on_another_device,
    randn,
    record,
    reference_for,
    student_name,
    tolerance,
    upstream_from,
)

SECTION_TF = "see section 2, 'Teacher forcing'"
SECTION_LR = "see section 3, 'The learning-rate schedule'"
SECTION_LS = "see section 4, 'Label smoothing'"
SECTION_LOOP = "see section 5, 'One epoch of training'"
SECTION_DECODE = "see section 6, 'Greedy decoding'"
SECTION_BEAM = "see section 7, 'Beam search'"
SECTION_BPE = "see section 8, 'Subwords by hand: byte-pair encoding'"
PAD, BOS, EOS = 0, 2, 3


upstream = upstream_from(ref)
JUDGED = True


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
    on_another_device(lambda: ns["shift_right"](torch.zeros(2, 5, dtype=torch.long, device="meta"), BOS),
                      "shift_right(tgt on a GPU, bos_id)", f"the column of bos_id ({SECTION_TF})")


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
    on_another_device(lambda: fn(torch.zeros(2, 5, dtype=torch.long, device="meta"), PAD),
                      "make_teacher_forcing_batch(tgt on a GPU)", f"a tensor it returns ({SECTION_TF})")


def _decoder_on_a_gpu(ns: dict[str, Any], name: str, model: torch.nn.Module, made: str, **kwargs: Any) -> None:
    """Run the student's decoder ``name`` with a copy of ``model`` and the source on the meta device,
    which stands in for a GPU (it refuses CPU tensors). With max_len=1 the loop does not run: an answer
    whose tensors are all made on the CPU returns a CPU tensor. With 3, a CPU tensor meets the model's.
    (Code that reads a value first, such as `if finished.all()`, stops there on meta: not judged.)"""
    model, src = copy.deepcopy(model).to("meta"), torch.zeros(2, 4, dtype=torch.long, device="meta")
    for max_len in (1, 3):
        on_another_device(lambda max_len=max_len: ns[name](model, src, max_len, BOS, EOS, **kwargs),
                          f"{name}(model and src on a GPU, max_len={max_len})", made)


def _noam_mistakes(step: int, d_model: int, warmup: int) -> dict[str, float | None]:
    return {
        "uses max instead of min: the rate is the SMALLER of the warm-up line and the 1/sqrt(step) "
        f"decay ({SECTION_LR}).": d_model**-0.5 * max(step**-0.5, step * warmup**-1.5),
        f"counts steps from 0 (uses step - 1); step counts from 1 ({SECTION_LR}).":
            ref.noam_lr(step - 1, d_model, warmup) if step > 1 else None,
        f"the d_model^-0.5 factor is missing ({SECTION_LR}).": min(step**-0.5, step * warmup**-1.5),
        f"the warm-up term uses warmup_steps^-0.5 instead of ^-1.5 ({SECTION_LR}).":
            d_model**-0.5 * min(step**-0.5, step * warmup**-0.5),
        f"is one step behind in the warm-up branch: step * warmup_steps^-1.5 is computed with step - 1 (0 at "
        f"step 1), while steps count from 1 ({SECTION_LR}).": d_model**-0.5 * min(step**-0.5, (step - 1) * warmup**-1.5),
        f"is one step ahead in the warm-up branch: step * warmup_steps^-1.5 is computed with step + 1; steps "
        f"count from 1 and the first step's rate is d_model^-0.5 * warmup_steps^-1.5 ({SECTION_LR}).":
            d_model**-0.5 * min(step**-0.5, (step + 1) * warmup**-1.5),
        f"returns the rate of step + 1, one step ahead: the step it is given already counts from 1, so it adds "
        f"nothing (the + 1 for LambdaLR, which counts from 0, belongs in the scheduler's lambda; {SECTION_LR}).":
            ref.noam_lr(step + 1, d_model, warmup),
    }


def _off_by_one(got: float, step: int, d_model: int, warmup: int) -> str:
    """'' unless ``got`` is the rate of step - 1 or step + 1: then a sentence that says so."""
    for other, direction in ((step - 1, "behind"), (step + 1, "ahead")):
        if other >= 1 and math.isclose(got, ref.noam_lr(other, d_model, warmup), rel_tol=1e-6):
            return (f" That is the rate of step {other}, one step {direction}: steps count from 1; look for a "
                    f"step - 1 or step + 1 in the formula or in one of its branches.")
    return ""


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
                             f"{abs(got[step] - expected) / expected:.2g}."
                             f"{_off_by_one(got[step], step, d_model, warmup)} Expected "
                             f"d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5) ({SECTION_LR}).")
    raw = ns["noam_lr"]  # unguarded: the error it raises is what is checked
    for step in (0, -1):
        try:
            value = raw(step, 512, 4000)
        except ValueError:
            record(f"noam_lr({step}, 512, 4000) raises", "ValueError", None)
            continue
        except NotImplementedError:
            raise
        except Exception as exc:  # any other outcome is the mistake being named
            outcome = f"raised {type(exc).__name__}"
        else:
            outcome = f"returned a rate ({value!r:.12})"
        raise AssertionError(
            f"noam_lr(step={step}, d_model=512, warmup_steps=4000) {outcome}; steps count from 1, so raise "
            f"ValueError when step < 1, as the docstring says: a scheduler that forgets LambdaLR's + 1 then fails "
            f"at once instead of training with a wrong rate ({SECTION_LR}).")


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
        # Clipping rescales the gradient (allowed); accumulation or a wrong loss changes its direction. A norm
        # larger by float32 rounding (measured 1.3e-7 relative) is no accumulation.
        if cosine < 0.999 or flat_mine.norm() > flat_want.norm() * (1 + tolerance(torch.float32)["rtol"]):
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
        if isinstance(got, torch.Tensor) and got.dim() == 2 and got.size(1) > expected.size(1):  # too long
            head = got[:, :expected.size(1)]
            if torch.equal(head, expected):
                raise AssertionError(f"{what}: the output has {got.size(1)} columns, expected {expected.size(1)}: "
                                     f"stop as soon as every row has produced <eos> ({SECTION_DECODE}).")
            real = expected != PAD
            if head.shape == expected.shape and torch.equal(head[real], expected[real]):
                row = int((head != expected).nonzero()[0, 0])
                raise AssertionError(
                    f"{what}: row {row} keeps generating after its <eos>, and the output has {got.size(1)} columns, "
                    f"expected {expected.size(1)}. A row stops at its <eos> (model.pad_id after it), and decoding "
                    f"stops as soon as every row has produced <eos> ({SECTION_DECODE}).")
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
    _decoder_on_a_gpu(ns, "greedy_decode", transformer,
                      f"a tensor it creates (the <bos> column, the finished flags or a mask) ({SECTION_DECODE})")


def _flat_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=PAD)


_COPY_MODELS: dict[Any, tuple[torch.nn.Module, torch.Tensor]] = {}  # by the notebook's batch function


def copy_model(ns: dict[str, Any]) -> torch.nn.Module:
    """The notebook's copy-task model trained with the REFERENCE train_epoch, so that the
    greedy_decode test does not depend on the student's train_epoch. Trained once per kernel
    (a second); each call gets its own copy and leaves torch's random state as training does."""
    batches = ns["copy_task_batches"]
    if batches not in _COPY_MODELS:
        model = _train_copy_model(batches)
        _COPY_MODELS[batches] = model, torch.random.get_rng_state()
    model, state = _COPY_MODELS[batches]
    torch.random.set_rng_state(state)
    return copy.deepcopy(model)


def _train_copy_model(batches: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    model = Transformer(12, 12, d_model=32, num_heads=4, num_layers=1, d_ff=64, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = _flat_cross_entropy
    ref.train_epoch(model, batches(1), optimizer, None, loss_fn, "cpu", max_grad_norm=1.0)
    for epoch in range(3):
        ref.train_epoch(model, batches(60, seed=epoch + 1), optimizer, None, loss_fn, "cpu", max_grad_norm=1.0)
    return model


# ---------------------------------------------------------------- byte-pair encoding
# Corpora where no merge step has a tie (tests/test_reference.py checks it), so every correct
# tie-break learns the same merges; each tells apart the mistakes named below.
BPE_CORPORA = [
    ({"nanan": 62, "ca": 43, "bababa": 29, "acbd": 54, "bacdbn": 26, "bccda": 25, "nd": 40, "nn": 59, "ccnan": 56}, 10),
    ({"nanan": 63, "ca": 73, "bababa": 35, "ccaaan": 53, "bcbbaa": 20, "nanbcc": 50, "dd": 27, "aa": 58, "ba": 40}, 10),
    ({"low": 12, "lower": 9, "lowest": 5, "newer": 9, "newest": 4, "wider": 4}, 5),
    ({"ab": 3, "b": 2}, 5),  # runs out of pairs after 2 merges
    # The last of its 6 merges, ('t', 'ie</w>'), is a pair seen once ("tie" occurs once): a search that
    # stops when the best pair is that rare (subword-nmt's default min_frequency of 2) stops one short.
    ({"lie": 11, "die": 6, "we": 10, "tie": 1}, 8),
]


def _bpe_variant(word_counts: dict[str, int], num_merges: int, marker: bool = True, weighted: bool = True,
                 first_only: bool = False, string_replace: bool = False,
                 once_per_word: bool = False, min_count: int = 1) -> list[tuple[str, str]]:
    """learn_bpe with one known mistake switched on, to name it."""
    vocab = {tuple(word) + ((ref.END_OF_WORD,) if marker else ()): count for word, count in word_counts.items()}
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        pairs: dict[tuple[str, str], int] = {}
        for symbols, count in vocab.items():
            found = list(zip(symbols, symbols[1:], strict=False))
            for pair in dict.fromkeys(found) if once_per_word else found:
                pairs[pair] = pairs.get(pair, 0) + (count if weighted else 1)
        if not pairs:
            break
        best = max(pairs, key=pairs.__getitem__)
        if pairs[best] < min_count:
            break
        merges.append(best)
        merged: dict[tuple[str, ...], int] = {}
        for symbols, count in vocab.items():
            if string_replace:
                new = tuple(" ".join(symbols).replace(" ".join(best), "".join(best)).split(" "))
            elif first_only and best in zip(symbols, symbols[1:], strict=False):
                i = list(zip(symbols, symbols[1:], strict=False)).index(best)
                new = symbols[:i] + ("".join(best),) + symbols[i + 2:]
            else:
                new = ref._merge_pair(symbols, best)
            merged[new] = merged.get(new, 0) + count
        vocab = merged
    return merges


def _as_merges(result: Any, what: str) -> list[tuple[str, str]]:
    if not isinstance(result, list | tuple) or not all(
            isinstance(m, list | tuple) and len(m) == 2 and all(isinstance(s, str) for s in m) for m in result):
        shown = type(result).__name__ if not isinstance(result, list | tuple) or not result else (
            f"a list whose first item is {result[0]!r}")
        raise AssertionError(f"{what} should return a list of merges, each a pair of strings such as ('e', 's'); "
                             f"got {shown} ({SECTION_BPE}).")
    return [tuple(m) for m in result]


def check_learn_bpe(ns: dict[str, Any]) -> None:
    learn = guarded(student_name(ns, "learn_bpe"), "learn_bpe")
    for word_counts, num_merges in BPE_CORPORA:
        what = f"learn_bpe(a corpus of {len(word_counts)} words, num_merges={num_merges})"
        got = _as_merges(learn(dict(word_counts), num_merges), what)
        expected = ref.learn_bpe(word_counts, num_merges)
        if got == expected:
            record(what, "\n".join(" ".join(m) for m in got), None)
            continue
        mistakes = {
            "words do not end with the '</w>' symbol, so no merge can mark the end of a word": {"marker": False},
            "pairs are counted once per distinct word; weight each word's pairs by its count": {"weighted": False},
            "only the first occurrence of the pair in each word is merged; merge every occurrence": {"first_only": True},
            "the merge joins the pair's text across symbol boundaries (a string replace on the joined "
            "symbols); merge only where two whole symbols form the pair": {"string_replace": True},
            "a pair that occurs twice in a word is counted once; count every occurrence": {"once_per_word": True},
            "merging stopped when the most frequent pair occurs only once; keep merging while any pair is "
            "left, up to num_merges, even a pair seen once": {"min_count": 2},
        }
        for description, switch in mistakes.items():
            if got == _bpe_variant(word_counts, num_merges, **switch):
                raise AssertionError(f"{what}: {description} ({SECTION_BPE}).")
        if got == expected[:-1] or (len(got) == len(expected) + 1 and got[:-1] == expected):
            raise AssertionError(f"{what}: returned {len(got)} merges; learn exactly num_merges merges, or fewer "
                                 f"only when no pair is left ({SECTION_BPE}).")
        if len(got) > len(expected) and got[:len(expected)] == expected:
            raise AssertionError(f"{what}: returned {len(got)} merges; stop once every word is a single symbol "
                                 f"({SECTION_BPE}).")
        step = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), min(len(got), len(expected)))
        shown = f"is {got[step]!r}" if step < len(got) else "is missing"
        raise AssertionError(f"{what}: merge {step + 1} {shown}, not the most frequent adjacent pair at that step "
                             f"(count pairs with word frequencies, then merge every occurrence) ({SECTION_BPE}).")


def _apply_variant(word: str, merges: list[tuple[str, str]], marker: bool = True, first_only: bool = False,
                   right_to_left: bool = False, joined: bool = False) -> list[str]:
    symbols = list(word) + ([ref.END_OF_WORD] if marker else [])
    if joined:  # str.replace on the symbols joined by spaces: "a b" also matches inside "xa b" or "a bc"
        text = " ".join(symbols)
        for a, b in merges:
            text = text.replace(f"{a} {b}", a + b)
        return text.split()
    for pair in merges:
        if right_to_left:
            symbols = [s[::-1] for s in ref._merge_pair(tuple(s[::-1] for s in reversed(symbols)),
                                                         (pair[1][::-1], pair[0][::-1]))][::-1]
        elif first_only and pair in zip(symbols, symbols[1:], strict=False):
            i = list(zip(symbols, symbols[1:], strict=False)).index(pair)
            symbols[i:i + 2] = ["".join(pair)]
        elif not first_only:
            symbols = list(ref._merge_pair(tuple(symbols), pair))
    return symbols


def check_apply_bpe(ns: dict[str, Any]) -> None:
    apply = guarded(student_name(ns, "apply_bpe"), "apply_bpe")
    runs = [("aaaaa", [("a", "a")]), ("aaaaa", [("a", "a"), ("aa", "a")]), ("banana", [("a", "n"), ("an", "a")])]
    for word_counts, num_merges in BPE_CORPORA[:3]:
        merges = ref.learn_bpe(word_counts, num_merges)
        runs += [(word, merges) for word in list(word_counts)[:4] + ["nanananb", "dcba", "c"]]
    for word, merges in runs:
        what = f"apply_bpe({word!r}, {len(merges)} merges)"
        got = apply(word, [tuple(m) for m in merges])
        if isinstance(got, str):
            raise AssertionError(f"{what} returned a string; return the list of subword symbols ({SECTION_BPE}).")
        if not isinstance(got, list | tuple) or not all(isinstance(s, str) for s in got):
            raise AssertionError(f"{what} should return a list of strings, got {type(got).__name__} ({SECTION_BPE}).")
        got = list(got)
        expected = ref.apply_bpe(word, merges)
        if got == expected:
            record(what, " ".join(got), None)
            continue
        mistakes = {
            "the word does not end with the '</w>' symbol before merging": {"marker": False},
            "each merge is applied to its first occurrence only; merge every occurrence": {"first_only": True},
            "occurrences are merged from right to left; scan from the left, so 'a a a' with the merge "
            "('a', 'a') gives 'aa a'": {"right_to_left": True},
            "a merge was applied across symbol boundaries: replacing the text 'a b' in the space-joined symbols "
            "also matches the end of a symbol 'xa' next to 'b', or 'a' next to the start of 'bc'. Compare whole "
            "symbols, pair by pair": {"joined": True},
        }
        shown = ", ".join(f"({a!r}, {b!r})" for a, b in merges[:10]) + (", ..." if len(merges) > 10 else "")
        inputs = f"With the merges, in order, [{shown}]: returned {got}, expected {expected}"
        for description, switch in mistakes.items():
            if got == _apply_variant(word, merges, **switch):
                raise AssertionError(f"{what}: {description}. {inputs} ({SECTION_BPE}).")
        raise AssertionError(f"{what}: {inputs}. Start from the characters plus '</w>' and apply each merge, "
                             f"in the order learned, to every occurrence from left to right ({SECTION_BPE}).")



# ---------------------------------------------------------------- beam search
class _Lookup(torch.nn.Module):
    """A model whose next-token log-probabilities are a fixed pseudo-random function of the
    source and the whole prefix, spread enough that beam search and greedy disagree, and with
    ``<eos>`` growing likelier with length so hypotheses end at different steps."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int, vocab: int = 9, salt: float = 0.0):
        super().__init__()
        self.pad_id, self.bos_id, self.eos_id, self.vocab, self.salt = pad_id, bos_id, eos_id, vocab, salt
        self.generator = torch.nn.Identity()

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        keep = (src != self.pad_id).to(torch.float64)  # padding must not change a row's translation
        weights = 1.61 ** torch.arange(src.size(1), dtype=torch.float64)
        return ((src.to(torch.float64) * weights * keep).sum(-1, keepdim=True) + self.salt)[:, None, :].expand(
            -1, src.size(1), 1)  # (B, S, 1)

    def decode(self, tgt, memory, src_mask, tgt_mask) -> torch.Tensor:
        b, t = tgt.shape
        h = torch.cumsum(tgt.to(torch.float64) * 1.37 ** torch.arange(t, dtype=torch.float64), dim=1)  # (B, T)
        h = h + memory[:, :1, 0]
        v = torch.arange(self.vocab, dtype=torch.float64)
        logits = 3.0 * (torch.sin((h[..., None] + 7.1 * v) * 12.9898) * 43758.5453).remainder(1.0)  # (B, T, V)
        steps = torch.arange(1, t + 1, dtype=torch.float64)[None, :]
        logits[..., self.eos_id] += 0.9 * (steps - 4.0)
        logits[..., self.pad_id] = -30.0
        logits[..., self.bos_id] = -30.0
        return logits.to(torch.float32)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt, self.encode(src, None), None, None)


class _Endless(torch.nn.Module):
    """``[eos]`` is the best hypothesis after one step, and every other one goes on forever (its
    next token is almost certain, <eos> almost impossible): only the ``max_len`` bound ends the search.
    Asked to extend hypotheses that already hold ``max_len`` tokens, it says so.

    ``[eos]`` (log 0.7) leads ``[x, ...]`` (log 0.3, then steps of log-probability 0 in float32) by
    0.85 at every step: with a tie there, the answer would depend on the order of the beam's slots."""

    X = 5

    def __init__(self, pad_id: int, max_len: int, vocab: int = 9):
        super().__init__()
        self.pad_id, self.max_len, self.vocab = pad_id, max_len, vocab
        self.generator = torch.nn.Identity()

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, tgt, memory, src_mask, tgt_mask) -> torch.Tensor:
        if tgt.size(1) >= self.max_len:
            raise AssertionError(
                f"beam_search went on extending hypotheses that already hold max_len={self.max_len} tokens while "
                f"the best one was finished: end the search when the hypotheses still running hold max_len tokens "
                f"(a loop test on the length of the best hypothesis never ends when it is a finished, short one) "
                f"({SECTION_BEAM}).")
        b, t = tgt.shape
        logits = torch.full((b, t, self.vocab), -30.0)
        logits[..., self.X] = 0.0
        logits[..., EOS] = -20.0
        logits[:, 0, EOS], logits[:, 0, self.X] = math.log(0.7), math.log(0.3)
        return logits


class _Tree(torch.nn.Module):
    """Scripted probabilities for the hypotheses [eos], [x, eos], [x, x, eos] per source row
    (row r uses ``LOG_P[src[r, 0]]``), so that each length penalty picks a different one."""

    X = 5
    # first token -> log P of (eos | ), (x | ), (eos | x), (x | x); then (eos | x x) = log 0.99.
    # Row 8: [eos] leads after one step, [x, eos] overtakes it once normalised (alpha = 1).
    LOG_P = {4: (-1.0, -0.5, -0.6, -0.99), 6: (-1.0, -0.5, -0.655, -5.0), 7: (-2.0, -0.3, -1.6, -3.0),
             8: (-0.9, -1.0, -0.02, -5.0)}

    def __init__(self, pad_id: int, vocab: int = 9):
        super().__init__()
        self.pad_id, self.vocab = pad_id, vocab
        self.generator = torch.nn.Identity()

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        return src[:, :1, None].to(torch.float32).expand(-1, src.size(1), 1)  # (B, S, 1)

    def _row(self, first: int, prefix: list[int]) -> torch.Tensor:
        eos0, x0, eos1, x1 = self.LOG_P[first]
        table = {0: (eos0, x0), 1: (eos1, x1), 2: (math.log(0.99), math.log(0.005))}
        n = len(prefix)
        eos, x = table[n] if all(t == self.X for t in prefix) and n in table else (math.log(0.9), math.log(0.01))
        rest = math.log(max(1.0 - math.exp(eos) - math.exp(x), 1e-6) / (self.vocab - 2))
        row = torch.full((self.vocab,), rest, dtype=torch.float64)
        row[EOS], row[self.X] = eos, x
        return row

    def decode(self, tgt, memory, src_mask, tgt_mask) -> torch.Tensor:
        out = torch.empty(tgt.size(0), tgt.size(1), self.vocab, dtype=torch.float64)
        for b in range(tgt.size(0)):
            for t in range(tgt.size(1)):
                out[b, t] = self._row(int(memory[b, 0, 0]), tgt[b, 1:t + 1].tolist())
        return out.to(torch.float32)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt, self.encode(src, None), None, None)


def _beam_variant(model, src: torch.Tensor, max_len: int, beam_size: int, alpha: float, penalty: str = "gnmt",
                  carry: bool = True, copies: bool = False, probabilities: bool = False,
                  stop_on_best: bool = False) -> torch.Tensor:
    """Row-by-row beam search with one known mistake switched on, to name it."""
    def lp(n: int) -> float:
        if penalty == "none":
            return 1.0
        if penalty == "power":
            return max(n, 1) ** alpha
        return ((5 + n + (1 if penalty == "with_bos" else 0)) / 6) ** alpha

    rows = []
    for row in src:
        s = row[None]
        mask = ref.make_padding_mask(s, model.pad_id)
        memory = model.encode(s, mask)
        beams = [([BOS], 1.0 if probabilities else 0.0)] * (beam_size if copies else 1)
        while len(beams[0][0]) < max_len and not all(h[-1] == EOS for h, _ in beams):
            if stop_on_best and len(beams[0][0]) > 1 and beams[0][0][-1] == EOS:
                break
            cands = []
            for h, score in beams:
                if h[-1] == EOS and carry:
                    cands.append((h, score))
                    continue
                ys = torch.tensor([h])
                logits = model.generator(model.decode(ys, memory, mask, ref.make_decoder_mask(ys, model.pad_id))[0, -1])
                step = F.softmax(logits.double(), -1) if probabilities else F.log_softmax(logits.double(), -1)
                cands += [(h + [v], score * step[v].item() if probabilities else score + step[v].item())
                          for v in range(step.size(0))]
            cands.sort(key=lambda c: c[1] / lp(len(c[0]) - 1), reverse=True)
            beams = cands[:beam_size]
        rows.append(max(beams, key=lambda c: c[1] / lp(len(c[0]) - 1))[0])
    width = max(len(h) for h in rows)
    return torch.tensor([h + [model.pad_id] * (width - len(h)) for h in rows])


def _beam_mistakes(variants: dict[str, dict[str, Any]], model, src: torch.Tensor, max_len: int, beam_size: int,
                   alpha: float) -> dict[str, torch.Tensor]:
    """The known mistakes' outputs on this input; mistakes that give the same output here are
    named together ("A, or B"), so a message never names one of them wrongly."""
    groups: list[tuple[list[str], torch.Tensor]] = []
    for description, kw in variants.items():
        out = _beam_variant(model, src, max_len, beam_size, alpha, **kw)
        same = next((g for g in groups if g[1].shape == out.shape and torch.equal(g[1], out)), None)
        if same is None:
            groups.append(([description], out))
        else:
            same[0].append(description)
    return {f"{'; or '.join(names)} ({SECTION_BEAM}).": out for names, out in groups}


def _trim(got: Any) -> Any:
    """Drops trailing columns that hold only padding (a row-by-row search may pad to max_len)."""
    if isinstance(got, torch.Tensor) and got.dim() == 2 and got.dtype == torch.long:
        while got.size(1) > 1 and bool((got[:, -1] == PAD).all()):
            got = got[:, :-1]
    return got


def check_beam_search(ns: dict[str, Any]) -> None:
    beam = guarded(student_name(ns, "beam_search"), "beam_search")
    variants = {
        "the length penalty is missing: hypotheses are ranked by log P(Y) alone, which favours short ones":
            {"penalty": "none"},
        "the length penalty is |Y| ** alpha; the GNMT penalty is ((5 + |Y|) / 6) ** alpha": {"penalty": "power"},
        "|Y| counts <bos>; it counts the generated tokens, <eos> included": {"penalty": "with_bos"},
        "finished hypotheses keep being extended; one that ends in eos_id is carried over unchanged":
            {"carry": False},
        "the beam starts with beam_size copies of <bos>, so it fills with copies of one hypothesis; "
        "start from a single hypothesis": {"copies": True},
        "scores multiply probabilities; add log-probabilities, log P(Y) = sum of log p(y_t | y_<t, x)":
            {"probabilities": True},
        "the row stops as soon as its best hypothesis is finished; it stops when ALL kept hypotheses are "
        "(a longer one may still overtake it)": {"stop_on_best": True},
    }
    # A model with spread-out probabilities: hypotheses compete and end at different steps.
    src = torch.tensor([[5, 6, 7, 8], [4, 9, 7, PAD], [8, 8, PAD, PAD], [6, 4, 5, 7], [7, 5, PAD, PAD]])
    for salt, max_len, beam_size, alpha in [(0.0, 10, 3, 0.6), (0.3, 10, 4, 0.0), (0.7, 12, 2, 1.0), (1.1, 5, 3, 0.6)]:
        model = _Lookup(PAD, BOS, EOS, salt=salt)
        expected = ref.beam_search(model, src, max_len, BOS, EOS, beam_size=beam_size, length_penalty=alpha)
        what = f"beam_search(max_len={max_len}, beam_size={beam_size}, length_penalty={alpha})"
        got = _trim(beam(model, src, max_len, BOS, EOS, beam_size=beam_size, length_penalty=alpha))
        mistakes = {}
        if isinstance(got, torch.Tensor) and not (got.shape == expected.shape and torch.equal(got, expected)):
            mistakes = _beam_mistakes(variants, model, src, max_len, beam_size, alpha)
        assert_matches(got, expected, what, mistakes,
                       hint=f"Per row, keep the beam_size best hypotheses by log P(Y) / lp(Y); carry finished "
                            f"ones over unchanged; stop when all kept ones are finished or at max_len; return "
                            f"the best ({SECTION_BEAM}).")
    # The length penalty decides between [eos], [x, eos] and [x, x, eos].
    for length_penalty in (1.0, 0.6):
        mistakes = {}
        tree, src = _Tree(PAD), torch.tensor([[4, 9], [6, 9], [7, 9], [8, 9]])
        expected = ref.beam_search(tree, src, 6, BOS, EOS, beam_size=3, length_penalty=length_penalty)
        got = _trim(beam(tree, src, 6, BOS, EOS, beam_size=3, length_penalty=length_penalty))
        if isinstance(got, torch.Tensor) and not (got.shape == expected.shape and torch.equal(got, expected)):
            mistakes = _beam_mistakes(variants, tree, src, 6, 3, length_penalty)
        assert_matches(got, expected, f"beam_search(beam_size=3, length_penalty={length_penalty}) where the "
                       "length penalty decides between a short and a longer hypothesis", mistakes,
                       hint=f"Score each hypothesis by log P(Y) / ((5 + |Y|) / 6) ** length_penalty, |Y| its "
                            f"generated tokens ({SECTION_BEAM}).")
    # The best hypothesis finishes at once and the others never do: max_len ends the search.
    endless, src = _Endless(PAD, max_len=6), torch.tensor([[4, 9], [6, PAD]])
    expected = ref.beam_search(endless, src, 6, BOS, EOS, beam_size=2, length_penalty=0.0)
    assert_matches(_trim(beam(endless, src, 6, BOS, EOS, beam_size=2, length_penalty=0.0)), expected,
                   "beam_search(max_len=6, beam_size=2, length_penalty=0.0) where the best hypothesis is finished "
                   "after one step and the others never finish",
                   hint=f"The finished one-token hypothesis scores best here and no other ever finishes: carry it "
                        f"over unchanged while the others grow, end the search when they hold max_len tokens, "
                        f"and return the best kept hypothesis, finished or not ({SECTION_BEAM}).")
    # beam_size=1 is greedy decoding, on a small random Transformer.
    gen = generator(707)
    transformer = Transformer(11, 13, d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0, pad_id=PAD).eval()
    with torch.no_grad():
        for p in transformer.parameters():
            p.copy_(randn(*p.shape, gen=gen) * 0.5)
        transformer.generator.bias[EOS] -= 2.0
    src = torch.randint(4, 11, (4, 6), generator=gen)
    src[1, 4:] = PAD
    expected = ref.greedy_decode(transformer, src, 9, BOS, EOS)
    assert_matches(_trim(beam(transformer, src, 9, BOS, EOS, beam_size=1, length_penalty=0.6)), expected,
                   "beam_search(beam_size=1) on a small random Transformer",
                   hint=f"With one hypothesis, beam search is greedy decoding ({SECTION_BEAM}).")
    _decoder_on_a_gpu(ns, "beam_search", transformer,
                      f"a tensor of the hypotheses (their tokens, scores, lengths or row indices) ({SECTION_BEAM})",
                      beam_size=2, length_penalty=0.6)
