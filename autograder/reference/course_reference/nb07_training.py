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
        # bf16 mixed precision on a GPU with bf16 tensor cores (compute capability 8.0 and up), float32
        # on an older one; on a CPU whatever the caller set (an outer autocast) holds.
        amp = (torch.autocast("cuda", dtype=torch.bfloat16, enabled=torch.cuda.is_bf16_supported(False))
               if torch.device(device).type == "cuda" else contextlib.nullcontext())
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


END_OF_WORD = "</w>"


def _merge_pair(symbols: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    """Every non-overlapping occurrence of ``pair`` in ``symbols`` merged, scanning left to right."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def learn_bpe(word_counts: dict[str, int], num_merges: int) -> list[tuple[str, str]]:
    """Learn byte-pair-encoding merges (Sennrich et al., 2016, Algorithm 1).

    Each word starts as its characters followed by ``"</w>"``. Each step counts the adjacent
    symbol pairs over all words, weighted by the words' counts, and merges every occurrence of
    the most frequent pair (ties: the pair counted first). Stops after ``num_merges`` merges or
    when every word is a single symbol.

    Args:
        word_counts: word -> how often it occurs (words without spaces, counts >= 1).
        num_merges: the most merges to learn (>= 0).

    Returns:
        The merges in the order learned, e.g. ``[("e", "s"), ("es", "t"), ("est", "</w>")]``.

    Raises:
        ValueError: if ``num_merges < 0``.
    """
    if num_merges < 0:
        raise ValueError(f"num_merges must be >= 0, got {num_merges}")
    vocab = {tuple(word) + (END_OF_WORD,): count for word, count in word_counts.items()}
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        pairs: dict[tuple[str, str], int] = {}
        for symbols, count in vocab.items():
            for pair in zip(symbols, symbols[1:], strict=False):
                pairs[pair] = pairs.get(pair, 0) + count
        if not pairs:
            break
        best = max(pairs, key=pairs.__getitem__)  # the first counted among equals
        merges.append(best)
        vocab = {_merge_pair(symbols, best): count for symbols, count in vocab.items()}
    return merges


def apply_bpe(word: str, merges: list[tuple[str, str]]) -> list[str]:
    """Split ``word`` into subwords with learned merges, applied in the order learned.

    Args:
        word: one word (no spaces).
        merges: the output of ``learn_bpe``.

    Returns:
        The word's symbols: its characters plus ``"</w>"``, after each merge in turn merged
        every non-overlapping occurrence from left to right; ``"".join(result)`` is
        ``word + "</w>"``.
    """
    symbols = tuple(word) + (END_OF_WORD,)
    for pair in merges:
        symbols = _merge_pair(symbols, pair)
    return list(symbols)


def length_penalty_gnmt(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """``((5 + |Y|) / 6) ** alpha`` (Wu et al., 2016, equation 14)."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int, beam_size: int = 4,
                length_penalty: float = 0.6) -> torch.Tensor:
    """Translate with beam search, scoring hypotheses as GNMT does (paper section 6.1).

    A hypothesis ``Y`` scores ``log P(Y | src) / lp(Y)``, ``lp(Y) = ((5 + |Y|) / 6) ** length_penalty``,
    ``|Y|`` counting generated tokens (``eos_id`` included, ``bos_id`` not). Each step extends
    every unfinished hypothesis by every token, carries finished ones (ending in ``eos_id``)
    over unchanged, and keeps the ``beam_size`` best. A row is done when all its kept
    hypotheses are finished, or when they hold ``max_len`` tokens; it returns its best.

    Args:
        model: a ``Transformer`` in eval mode (``encode``, ``decode``, ``generator``, ``pad_id``).
        src: ``(B, S)`` int64 source tokens, padded with ``model.pad_id``.
        max_len: the most tokens per output row, ``<bos>`` included (>= 1).
        bos_id, eos_id: begin- and end-of-sentence ids.
        beam_size: hypotheses kept per row (>= 1); 1 is greedy decoding.
        length_penalty: ``alpha`` (0: no length normalisation; the paper uses 0.6).

    Returns:
        ``(B, L)`` int64, ``L <= max_len``: column 0 is ``bos_id``, each row its best hypothesis,
        ``model.pad_id`` after its ``eos_id``; ``L`` is the longest best hypothesis.

    Raises:
        ValueError: if ``beam_size < 1`` or ``max_len < 1``.
    """
    if beam_size < 1 or max_len < 1:
        raise ValueError(f"beam_size and max_len must be >= 1, got {beam_size} and {max_len}")
    b, k, pad = src.size(0), beam_size, model.pad_id
    src_mask = make_padding_mask(src, pad)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask).repeat_interleave(k, dim=0)  # (B*K, S, D), encoded once
    src_mask = src_mask.repeat_interleave(k, dim=0)
    tokens = torch.full((b * k, 1), bos_id, dtype=torch.long, device=src.device)  # (B*K, t)
    log_p = torch.full((b, k), float("-inf"), device=src.device)
    log_p[:, 0] = 0.0  # one live hypothesis per row at first, so the beam holds no copies
    finished = torch.zeros(b, k, dtype=torch.bool, device=src.device)
    lengths = torch.zeros(b, k, device=src.device)  # generated tokens, eos included
    for step in range(1, max_len):
        if finished.all():
            break
        states = model.decode(tokens, memory, src_mask, make_decoder_mask(tokens, pad))[:, -1]  # (B*K, D)
        step_log_p = F.log_softmax(model.generator(states).float(), dim=-1)  # (B*K, V)
        vocab = step_log_p.size(-1)
        cand = log_p[..., None] + step_log_p.view(b, k, vocab)  # (B, K, V)
        cand_len = torch.full_like(cand, float(step))
        # A finished hypothesis has one continuation: itself, unchanged (written with a pad token).
        carried = torch.full_like(cand, float("-inf"))
        carried[..., pad] = log_p
        cand = torch.where(finished[..., None], carried, cand)
        cand_len = torch.where(finished[..., None], lengths[..., None], cand_len)
        score = cand / length_penalty_gnmt(cand_len, length_penalty)
        best = score.view(b, k * vocab).topk(k, dim=-1).indices  # (B, K)
        beam, token = best // vocab, best % vocab
        rows = torch.arange(b, device=src.device)[:, None]
        was_finished = finished[rows, beam]
        log_p = cand.view(b, k * vocab).gather(1, best)
        lengths = cand_len.view(b, k * vocab).gather(1, best)
        finished = was_finished | (token == eos_id)
        tokens = torch.cat([tokens.view(b, k, -1)[rows, beam], token[..., None]], dim=-1).view(b * k, -1)
    score = log_p / length_penalty_gnmt(lengths, length_penalty)
    choice = score.argmax(dim=-1)  # (B,)
    rows = torch.arange(b, device=src.device)
    out = tokens.view(b, k, -1)[rows, choice]  # (B, t)
    return out[:, : 1 + int(lengths[rows, choice].max())]
