"""Reference for notebook 08: a modern decoder-only language model.

Sources: Xiong et al. (2020), *On Layer Normalization in the Transformer Architecture* (pre-LN);
Zhang & Sennrich (2019), *Root Mean Square Layer Normalization*; Su et al. (2021), *RoFormer:
Enhanced Transformer with Rotary Position Embedding*, section 3.4 (eq. 34); Shazeer (2020),
*GLU Variants Improve Transformer* (SwiGLU); Ainslie et al. (2023), *GQA: Training Generalized
Multi-Query Transformer Models*; Press & Wolf (2017), *Using the Output Embedding to Improve
Language Models* (tied embeddings); Dao et al. (2022), *FlashAttention*, and Milakov &
Gimelshein (2018), *Online normalizer calculation for softmax* (attention by tiles); Holtzman
et al. (2019), *The Curious Case of Neural Text Degeneration* (top-p sampling).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

PastKV = tuple[torch.Tensor, torch.Tensor]


class RMSNorm(nn.Module):
    """Root mean square normalisation (Zhang & Sennrich, 2019, eq. 4).

    ``x / sqrt(mean(x^2) + eps) * weight`` over the last axis: no mean is subtracted and
    there is no bias (unlike LayerNorm).

    Attributes:
        weight: ``(D,)`` learned gain, starts at ones.

    Shape:
        forward(x ``(..., D)``) -> ``(..., D)``, the dtype of ``x``.
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms_inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return x * rms_inv * self.weight


def rotary_angles(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The angles ``p * base^(-2i/dim)`` of rotary embeddings, float64 ``(L, dim/2)``."""
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)  # (dim/2,)
    return positions.to(torch.float64)[:, None] * inv_freq  # (L, dim/2)


def apply_rotary_embedding(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate each pair of features ``(x[2i], x[2i+1])`` by the angle ``p * base^(-2i/d)``
    (Su et al., 2021, eq. 34), where ``p`` is the token's position.

    Args:
        x: ``(..., L, d)`` queries or keys, ``d`` even.
        positions: ``(L,)`` integer positions of the ``L`` tokens.
        base: the base of the frequencies (10000 in the paper).

    Returns:
        ``(..., L, d)``, the dtype of ``x``.

    Raises:
        ValueError: if ``d`` is odd or ``positions`` does not have ``L`` entries.
    """
    d = x.size(-1)
    if d % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: the last axis must be even, got {d}")
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f"positions must have shape ({x.size(-2)},) (one per token), got {tuple(positions.shape)}")
    angles = rotary_angles(positions.to(x.device), d, base)  # on x's device, whatever the caller passed
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (L, d/2)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., L, d/2)
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


class SwiGLU(nn.Module):
    """Gated feed-forward network ``w2(SiLU(w1 x) * w3 x)`` (Shazeer, 2020, eq. 6), no biases.

    Attributes:
        w1: ``nn.Linear(d_model, d_ff, bias=False)``, the gate (through SiLU).
        w3: ``nn.Linear(d_model, d_ff, bias=False)``, the value it gates.
        w2: ``nn.Linear(d_ff, d_model, bias=False)``, back to the model size.

    Shape:
        forward(x ``(..., d_model)``) -> ``(..., d_model)``.
    """

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat each key/value head ``n_rep`` times, next to itself (Ainslie et al., 2023).

    Query head ``j`` of ``h_kv * n_rep`` then reads key/value head ``j // n_rep``: the heads of
    one group are consecutive.

    Args:
        x: ``(B, h_kv, L, d_head)``.
        n_rep: query heads per key/value head (``num_heads // num_kv_heads``).

    Returns:
        ``(B, h_kv * n_rep, L, d_head)``.
    """
    return x.repeat_interleave(n_rep, dim=1)


def causal_mask(num_queries: int, num_keys: int, device: torch.device | None = None) -> torch.Tensor:
    """``(num_queries, num_keys)`` bool, ``True`` = attend: the queries are the last ``num_queries``
    positions of ``num_keys``, so query ``i`` sees keys ``0 .. num_keys - num_queries + i``."""
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(num_keys - num_queries)


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
              ) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) masked) v`` (the course's attention, weights not returned)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ value


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with rotary positions, ``num_kv_heads`` key/value heads shared by
    groups of query heads (Ainslie et al., 2023), and a key/value cache for generation.

    ``num_kv_heads == num_heads`` is multi-head attention; ``num_kv_heads == 1`` is multi-query
    attention (Shazeer, 2019).

    Attributes:
        w_q: ``nn.Linear(d_model, d_model, bias=False)``.
        w_k, w_v: ``nn.Linear(d_model, num_kv_heads * d_head, bias=False)``.
        w_o: ``nn.Linear(d_model, d_model, bias=False)``.

    Shape:
        forward(x ``(B, L, D)``, past_kv ``(k, v)`` each ``(B, h_kv, P, d_head)`` or None)
        -> (``(B, L, D)``, ``(k, v)`` each ``(B, h_kv, P + L, d_head)``). The ``L`` new tokens
        sit at positions ``P .. P + L - 1``; the cache holds keys already rotated.

    Raises:
        ValueError: if ``d_model`` is not divisible by ``num_heads``, or ``num_heads`` by
            ``num_kv_heads``.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, rope_base: float = 10000.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} must be divisible by num_kv_heads={num_kv_heads}")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_head = d_model // num_heads
        self.rope_base = rope_base
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, past_kv: PastKV | None = None) -> tuple[torch.Tensor, PastKV]:
        batch, length, d_model = x.shape
        start = 0 if past_kv is None else past_kv[0].size(2)
        q = self.w_q(x).view(batch, length, self.num_heads, self.d_head).transpose(1, 2)  # (B, h, L, dh)
        k = self.w_k(x).view(batch, length, self.num_kv_heads, self.d_head).transpose(1, 2)  # (B, h_kv, L, dh)
        v = self.w_v(x).view(batch, length, self.num_kv_heads, self.d_head).transpose(1, 2)
        positions = torch.arange(start, start + length, device=x.device)
        q = apply_rotary_embedding(q, positions, self.rope_base)
        k = apply_rotary_embedding(k, positions, self.rope_base)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)  # (B, h_kv, P + L, dh)
            v = torch.cat([past_kv[1], v], dim=2)
        n_rep = self.num_heads // self.num_kv_heads
        mask = causal_mask(length, start + length, x.device)
        out = attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask)  # (B, h, L, dh)
        out = out.transpose(1, 2).reshape(batch, length, d_model)
        return self.w_o(out), (k, v)


def online_softmax_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             tile_size: int = 64, causal: bool = False) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d)) v`` computed over tiles of ``tile_size`` keys, keeping for each
    query a running maximum ``m``, a running sum ``l`` and an unnormalised output ``acc``, and
    rescaling them by ``exp(m_old - m_new)`` when the maximum grows (Milakov & Gimelshein, 2018;
    Dao et al., 2022, section 3.1). No ``(L_q, L_k)`` matrix is formed.

    Args:
        query: ``(..., L_q, d)``; key: ``(..., L_k, d)``; value: ``(..., L_k, d_v)``.
        tile_size: keys per tile (positive).
        causal: mask keys after the query; the queries are the last ``L_q`` positions of the
            ``L_k`` (query ``i`` sees keys ``0 .. L_k - L_q + i``).

    Returns:
        ``(..., L_q, d_v)``, the dtype of ``query``.

    Raises:
        ValueError: if ``tile_size < 1``.
    """
    if tile_size < 1:
        raise ValueError(f"tile_size must be positive, got {tile_size}")
    num_queries, num_keys = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1))
    shape = query.shape[:-1]
    running_max = torch.full((*shape, 1), float("-inf"), dtype=query.dtype, device=query.device)
    running_sum = torch.zeros((*shape, 1), dtype=query.dtype, device=query.device)
    acc = torch.zeros((*shape, value.size(-1)), dtype=query.dtype, device=query.device)
    rows = torch.arange(num_queries, device=query.device)[:, None] + (num_keys - num_queries)
    for start in range(0, num_keys, tile_size):
        k_tile, v_tile = key[..., start:start + tile_size, :], value[..., start:start + tile_size, :]
        scores = query @ k_tile.transpose(-2, -1) * scale  # (..., L_q, tile)
        if causal:
            cols = torch.arange(start, start + k_tile.size(-2), device=query.device)[None, :]
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        # A row with no visible key yet keeps max -inf: use 0 so that exp() gives 0, not NaN.
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        correction = torch.exp(running_max - safe_max)
        p = torch.exp(scores - safe_max)
        running_sum = running_sum * correction + p.sum(dim=-1, keepdim=True)
        acc = acc * correction + p @ v_tile
        running_max = new_max
    return acc / running_sum


class DecoderBlock(nn.Module):
    """A pre-LN decoder block (Xiong et al., 2020): ``x + attn(norm(x))``, then
    ``x + ffn(norm(x))``. The residual path is never normalised, so gradients reach early
    layers undamped and training is stable without learning-rate warm-up.

    Attributes:
        attn_norm, ffn_norm: :class:`RMSNorm`; attn: :class:`GroupedQueryAttention`;
        ffn: :class:`SwiGLU`.

    Shape:
        forward(x ``(B, L, D)``, past_kv or None) -> (``(B, L, D)``, the layer's new ``(k, v)``).
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, d_ff: int):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x: torch.Tensor, past_kv: PastKV | None = None) -> tuple[torch.Tensor, PastKV]:
        h, present = self.attn(self.attn_norm(x), past_kv)
        x = x + h
        return x + self.ffn(self.ffn_norm(x)), present


class DecoderLM(nn.Module):
    """A decoder-only language model: token embedding, ``num_layers`` :class:`DecoderBlock`, a
    final :class:`RMSNorm`, and an output layer whose weight *is* the embedding matrix (tied
    embeddings; Press & Wolf, 2017; Vaswani et al., 2017, section 3.4). Positions come from
    the rotary embeddings inside attention, so nothing is added to the embeddings.

    Attributes:
        embedding: ``nn.Embedding(vocab_size, d_model)``; layers: ``nn.ModuleList`` of blocks;
        norm: :class:`RMSNorm`; lm_head: ``nn.Linear(d_model, vocab_size, bias=False)`` with
        ``lm_head.weight is embedding.weight``.

    Shape:
        forward(tokens ``(B, L)`` int64, past_kvs: one ``(k, v)`` per layer or None)
        -> (logits ``(B, L, vocab_size)``, the list of new ``(k, v)``).
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_kv_heads: int, d_ff: int,
                 num_layers: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(DecoderBlock(d_model, num_heads, num_kv_heads, d_ff)
                                    for _ in range(num_layers))
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.embedding.weight  # one matrix, two uses
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, tokens: torch.Tensor, past_kvs: list[PastKV] | None = None
                ) -> tuple[torch.Tensor, list[PastKV]]:
        x = self.embedding(tokens)
        presents = []
        for i, layer in enumerate(self.layers):
            x, present = layer(x, None if past_kvs is None else past_kvs[i])
            presents.append(present)
        return self.lm_head(self.norm(x)), presents


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probabilities add up to at least
    ``top_p`` (the nucleus; Holtzman et al., 2019, section 3.1); the others get ``-inf``.

    A token is kept when the probability of the tokens ranked above it is below ``top_p``, so
    the most likely token is always kept. Ties are ranked by index (a stable sort).

    Args:
        logits: ``(..., V)``.
        top_p: in ``(0, 1]``; 1 keeps every token.

    Returns:
        ``(..., V)``, ``logits`` where kept and ``-inf`` elsewhere.

    Raises:
        ValueError: if ``top_p`` is not in ``(0, 1]``.
    """
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if top_p == 1:
        return logits  # every token (a running sum in floating point can reach 1 before the last one)
    sorted_logits, order = logits.sort(dim=-1, descending=True, stable=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above
    keep_sorted = before < top_p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_p: float = 1.0) -> torch.Tensor:
    """Draw one token per row from ``softmax(logits / temperature)`` restricted to the top-p
    nucleus; ``temperature == 0`` picks the most likely token (greedy).

    Args:
        logits: ``(B, V)``.
        temperature: ``>= 0``; below 1 sharpens the distribution, above 1 flattens it.
        top_p: in ``(0, 1]``, see :func:`top_p_filter`.

    Returns:
        ``(B,)`` int64 token ids, drawn with the global RNG (``torch.manual_seed``).

    Raises:
        ValueError: if ``temperature < 0``.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = top_p_filter(logits / temperature, top_p).softmax(dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(-1)


@torch.no_grad()
def generate(model: nn.Module, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_p: float = 1.0) -> torch.Tensor:
    """Extend ``prompt`` by ``max_new_tokens`` sampled tokens, feeding the model only the newest
    token at each step and the key/value cache of the steps before.

    Args:
        model: called as ``model(tokens, past_kvs) -> (logits, presents)`` (:class:`DecoderLM`).
        prompt: ``(B, L0)`` int64, ``L0 >= 1``.
        max_new_tokens: tokens to add (``>= 0``).
        temperature, top_p: see :func:`sample_next_token`.

    Returns:
        ``(B, L0 + max_new_tokens)`` int64: the prompt, then the new tokens.
    """
    tokens = prompt
    logits, past = model(prompt)
    for step in range(max_new_tokens):
        next_token = sample_next_token(logits[:, -1], temperature, top_p)  # (B,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        if step < max_new_tokens - 1:  # the last token's logits are never used
            logits, past = model(next_token[:, None], past)
    return tokens
