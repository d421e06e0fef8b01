"""Reference for notebook 07: teacher-forced training and greedy decoding.

Source: Vaswani et al. (2017), section 5.3 (the learning-rate schedule, equation 3),
section 5.4 (label smoothing, epsilon_ls = 0.1, from Szegedy et al. 2016), and section 3
(the decoder is auto-regressive: it consumes the symbols generated so far).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from .nb04_masking import make_decoder_mask, make_padding_mask


def shift_right(tgt: torch.Tensor, bos_id: int) -> torch.Tensor:
    """The decoder input for teacher forcing: ``bos_id`` prepended, the last token dropped.

    Args:
        tgt: ``(B, T)`` int64 target tokens.
        bos_id: the beginning-of-sentence id.

    Returns:
        ``(B, T)`` int64, ``out[:, 0] = bos_id``, ``out[:, 1:] = tgt[:, :-1]``.
    """
    bos = torch.full_like(tgt[:, :1], bos_id)
    return torch.cat([bos, tgt[:, :-1]], dim=1)


def make_teacher_forcing_batch(tgt: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``<bos> y_1 .. y_n <eos> <pad>..`` into decoder input and labels.

    Args:
        tgt: ``(B, T + 1)`` int64, each row ``<bos> y_1 .. y_n <eos>`` then padding.
        pad_id: the padding id (unused by the split; labels keep it so the loss can ignore it).

    Returns:
        ``(decoder_input, labels)``, both ``(B, T)``: ``tgt[:, :-1]`` and ``tgt[:, 1:]``;
        the label at position t is the token after decoder input t.
    """
    return tgt[:, :-1], tgt[:, 1:]


def noam_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """``d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)`` (paper eq. 3).

    Rises linearly for ``warmup_steps`` steps, then decays as ``1/sqrt(step)``; the peak is
    at ``step == warmup_steps``.

    Raises:
        ValueError: if ``step < 1`` (steps count from 1; ``LambdaLR`` starts at 0, so pass
            ``step + 1``).
    """
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against smoothed targets (paper section 5.4).

    The target distribution puts ``1 - smoothing`` on the true token and spreads
    ``smoothing`` uniformly over all ``V`` classes, exactly as
    ``F.cross_entropy(logits, target, label_smoothing=smoothing, ignore_index=ignore_index)``.

    Shape:
        forward(logits ``(N, V)`` or ``(B, T, V)``, target ``(N,)`` or ``(B, T)`` int64)
        -> scalar: the mean over targets that are not ``ignore_index``.
    """

    def __init__(self, smoothing: float = 0.1, ignore_index: int = -100):
        super().__init__()
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.smoothing = smoothing
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if logits.dtype in (torch.float16, torch.bfloat16):
            logits = logits.float()  # the loss in half precision loses too much
        log_probs = F.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))  # (N, V)
        target = target.reshape(-1)
        keep = target != self.ignore_index
        safe = target.masked_fill(~keep, 0)
        nll = -log_probs.gather(1, safe[:, None]).squeeze(1)  # (N,)
        uniform = -log_probs.mean(dim=-1)  # cross-entropy with the uniform distribution
        loss = (1.0 - self.smoothing) * nll + self.smoothing * uniform
        return (loss * keep).sum() / keep.sum()  # NaN when every target is ignored, as F.cross_entropy


def train_epoch(model, loader, optimizer, scheduler, loss_fn, device, max_grad_norm: float | None = 1.0) -> float:
    """One pass of teacher-forced training over ``loader``.

    Args:
        model: a ``Transformer``; ``model(src, decoder_input)`` -> logits ``(B, T, V)``.
        loader: yields ``(src (B, S), tgt (B, T + 1))`` int64 batches, ``tgt`` as
            ``<bos> y <eos> <pad>..``.
        optimizer: stepped once per batch, gradients zeroed before each backward.
        scheduler: stepped once per batch after the optimizer, or ``None``.
        loss_fn: mean loss over non-pad targets, e.g. ``LabelSmoothingLoss``.
        device: where batches go.
        max_grad_norm: clip the gradients' global norm to this (``None``: no clipping).

    Returns:
        The mean loss per target token (batches weighted by their count of non-pad labels).
    """
    model.train()
    total_loss, total_tokens = 0.0, 0
    for src, tgt in loader:
        src, tgt = src.to(device), tgt.to(device)
        decoder_input, labels = make_teacher_forcing_batch(tgt, model.pad_id)
        # bf16 mixed precision on a GPU; on a CPU whatever the caller set (an outer autocast) holds.
        amp = (torch.autocast("cuda", dtype=torch.bfloat16) if torch.device(device).type == "cuda"
               else contextlib.nullcontext())
        with amp:
            logits = model(src, decoder_input)  # (B, T, V)
        loss = loss_fn(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if max_grad_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        tokens = int((labels != model.pad_id).sum())
        total_loss += loss.item() * tokens
        total_tokens += tokens
    return total_loss / max(total_tokens, 1)


@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int) -> torch.Tensor:
    """Translate by always taking the most likely next token.

    Args:
        model: a ``Transformer`` (put it in ``eval()`` mode first).
        src: ``(B, S)`` int64 source tokens, padded with ``model.pad_id``.
        max_len: the longest output, ``<bos>`` included.
        bos_id, eos_id: begin- and end-of-sentence ids.

    Returns:
        ``(B, L)`` int64 with ``L <= max_len``; column 0 is ``bos_id``; decoding stops when
        every row has produced ``eos_id`` (or at ``max_len``); positions after a row's
        ``eos_id`` hold ``model.pad_id``.
    """
    src_mask = make_padding_mask(src, model.pad_id)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask)  # (B, S, D), computed once
    out = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        tgt_mask = make_decoder_mask(out, model.pad_id)  # (B, 1, t, t)
        logits = model.generator(model.decode(out, memory, src_mask, tgt_mask)[:, -1])  # (B, V)
        next_token = logits.argmax(dim=-1).masked_fill(finished, model.pad_id)
        out = torch.cat([out, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return out
