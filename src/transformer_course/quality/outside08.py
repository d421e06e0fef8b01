"""Notebook 08 (modern decoder): answers adapted from public implementations, and bugs reported
in their issue threads, each with where it comes from (same format as ``quality/outside.py``).

Each entry keeps its source's approach (how it computes, reduces, indexes), rewritten to the
course's names and signatures. Helpers an entry needs are defined in its own code under private
names (``_...``) so that they never replace another exercise's answer in the notebook.
A mistake's ``words`` (what its feedback must contain) are set in ``_WORDS`` at the end. Gathered by a
helper with a fresh context from the sources named; each entry was run against the reference.
"""

from __future__ import annotations

META_LLAMA = "https://github.com/meta-llama/llama (llama/model.py: RMSNorm, apply_rotary_emb, repeat_kv, Attention, FeedForward, TransformerBlock)"
META_GEN = "https://github.com/meta-llama/llama (llama/generation.py: generate, sample_top_p)"
HF_LLAMA = "https://github.com/huggingface/transformers (src/transformers/models/llama/modeling_llama.py)"
HF_TOPP = "https://github.com/huggingface/transformers (src/transformers/generation/logits_process.py, TopPLogitsWarper)"
HF_SAMPLE = "https://github.com/huggingface/transformers (src/transformers/generation/utils.py, _sample loop with past_key_values)"
LLAMA2C = "https://github.com/karpathy/llama2.c (model.py)"
LLAMA2C_RUN = "https://github.com/karpathy/llama2.c (run.c, sample_topp)"
LITGPT = "https://github.com/Lightning-AI/litgpt (litgpt/model.py)"
TORCHTUNE = "https://github.com/pytorch/torchtune (torchtune/modules/position_embeddings.py, RotaryPositionalEmbeddings)"
LUCID_ROPE = "https://github.com/lucidrains/rotary-embedding-torch (rotary_embedding_torch.py, interleaved rotate_half)"
TRITON_FA = "https://github.com/triton-lang/triton (python/tutorials/06-fused-attention.py, _attn_fwd_inner)"
FA1_TORCH = "https://github.com/wangshankun/OpProfiling (FlashAttention/flash_attention_v1.py, FlashAttention Algorithm 1 in PyTorch)"
ONLINE_SOFTMAX = "https://github.com/Infatoshi/physics-llm-inference (ch06/online_softmax.py, online_softmax_with_output)"
GIST_TOPP = "https://gist.github.com/thomwolf/1a5a29f6962089e871b94cbd09daf317 (top_k_top_p_filtering)"
MUSE_GUMBEL = "https://github.com/lucidrains/muse-maskgit-pytorch (muse_maskgit_pytorch.py, gumbel_sample)"
X_TRANSFORMERS = "https://github.com/lucidrains/x-transformers (x_transformers/x_transformers.py, TransformerWrapper tie_embedding)"
X_AR = "https://github.com/lucidrains/x-transformers (x_transformers/autoregressive_wrapper.py, generate)"
VLLM_MLP = "https://github.com/vllm-project/vllm (vllm/model_executor/models/llama.py, LlamaMLP gate_up_proj + SiluAndMul)"

_ROPE = "def apply_rotary_embedding(x, positions, base=10000.0):\n"
_ROPE_CHECKS = (
    "    d = x.size(-1)\n"
    "    if d % 2:\n        raise ValueError(f'the last axis must be even, got {d}')\n"
    "    if positions.dim() != 1 or positions.numel() != x.size(-2):\n"
    "        raise ValueError(f'positions must have shape ({x.size(-2)},)')\n")
_TOPP = "def top_p_filter(logits, top_p):\n"
_TOPP_CHECK = "    if not 0 < top_p <= 1:\n        raise ValueError(f'top_p must be in (0, 1], got {top_p}')\n"
_SAMPLE = "def sample_next_token(logits, temperature=1.0, top_p=1.0):\n"
_T_CHECK = "    if temperature < 0:\n        raise ValueError(f'temperature must be >= 0, got {temperature}')\n"
_GEN = "@torch.no_grad()\ndef generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):\n"
_RMS_INIT = (
    "class RMSNorm(nn.Module):\n"
    "    def __init__(self, d_model, eps=1e-6):\n        super().__init__()\n"
    "        self.eps = eps\n        self.weight = nn.Parameter(torch.ones(d_model))\n\n")
_SWIGLU_INIT = (
    "class SwiGLU(nn.Module):\n"
    "    def __init__(self, d_model, d_ff):\n        super().__init__()\n"
    "        self.w1 = nn.Linear(d_model, d_ff, bias=False)\n"
    "        self.w3 = nn.Linear(d_model, d_ff, bias=False)\n"
    "        self.w2 = nn.Linear(d_ff, d_model, bias=False)\n\n")
_REPEAT = "def repeat_kv(x, n_rep):\n"

# --- GroupedQueryAttention: shared pieces --------------------------------------------------------
_GQA_INIT = (
    "class GroupedQueryAttention(nn.Module):\n"
    "    def __init__(self, d_model, num_heads, num_kv_heads, rope_base=10000.0):\n"
    "        super().__init__()\n"
    "        if d_model % num_heads:\n            raise ValueError('d_model must be divisible by num_heads')\n"
    "        if num_heads % num_kv_heads:\n            raise ValueError('num_heads must be divisible by num_kv_heads')\n"
    "        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads\n"
    "        self.d_head = d_model // num_heads\n        self.rope_base = rope_base\n"
    "        self.w_q = nn.Linear(d_model, d_model, bias=False)\n"
    "        self.w_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)\n"
    "        self.w_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)\n"
    "        self.w_o = nn.Linear(d_model, d_model, bias=False)\n\n")
# Meta's complex-number RoPE on the (B, L, h, dh) layout, start_pos as in llama/model.py.
_META_ROPE_HELPERS = (
    "def _precompute_freqs_cis(dim, start, end, theta=10000.0):\n"
    "    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))\n"
    "    t = torch.arange(start, end, device=freqs.device)\n"
    "    freqs = torch.outer(t, freqs).float()\n"
    "    return torch.polar(torch.ones_like(freqs), freqs)\n\n"
    "def _apply_rotary_emb(xq, xk, freqs_cis):\n"
    "    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))\n"
    "    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))\n"
    "    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])\n"
    "    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)\n"
    "    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)\n"
    "    return xq_out.type_as(xq), xk_out.type_as(xk)\n\n"
    "def _repeat_kv_bshd(x, n_rep):\n"
    "    bs, slen, n_kv_heads, head_dim = x.shape\n"
    "    if n_rep == 1:\n        return x\n"
    "    return x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(\n"
    "        bs, slen, n_kv_heads * n_rep, head_dim)\n\n")
# Meta's Attention.forward with a concatenating cache (the course's past_kv) instead of a
# preallocated one; the mask is PR #900's: zeros for the cached keys, then the causal square.
_META_GQA = (
    _META_ROPE_HELPERS + _GQA_INIT +
    "    def forward(self, x, past_kv=None):\n"
    "        bsz, seqlen, _ = x.shape\n"
    "        start_pos = 0 if past_kv is None else past_kv[0].size(2)\n"
    "        xq, xk, xv = self.w_q(x), self.w_k(x), self.w_v(x)\n"
    "        xq = xq.view(bsz, seqlen, self.num_heads, self.d_head)\n"
    "        xk = xk.view(bsz, seqlen, self.num_kv_heads, self.d_head)\n"
    "        xv = xv.view(bsz, seqlen, self.num_kv_heads, self.d_head)\n"
    "        freqs_cis = _precompute_freqs_cis(self.d_head, start_pos, start_pos + seqlen, self.rope_base).to(x.device)\n"
    "        xq, xk = _apply_rotary_emb(xq, xk, freqs_cis)\n"
    "        keys, values = xk.transpose(1, 2), xv.transpose(1, 2)  # (B, h_kv, L, dh): the course's cache layout\n"
    "        if past_kv is not None:\n"
    "            keys = torch.cat([past_kv[0], keys], dim=2)\n"
    "            values = torch.cat([past_kv[1], values], dim=2)\n"
    "        present = (keys, values)\n"
    "        n_rep = self.num_heads // self.num_kv_heads\n"
    "        keys = _repeat_kv_bshd(keys.transpose(1, 2), n_rep).transpose(1, 2)\n"
    "        values = _repeat_kv_bshd(values.transpose(1, 2), n_rep).transpose(1, 2)\n"
    "        xq = xq.transpose(1, 2)\n"
    "        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.d_head)\n"
    "        mask = torch.full((seqlen, seqlen), float('-inf'), device=x.device).triu(1)\n"
    "        mask = torch.hstack([torch.zeros((seqlen, start_pos), device=x.device), mask]).type_as(xq)\n"
    "        scores = scores + mask\n"
    "        scores = F.softmax(scores.float(), dim=-1).type_as(xq)\n"
    "        output = torch.matmul(scores, values)\n"
    "        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)\n"
    "        return self.w_o(output), present\n")

# litgpt's CausalSelfAttention: (B, h, T, hs) layout, input_pos, repeat_interleave for the query
# groups, F.scaled_dot_product_attention with an explicit boolean mask; RoPE on adjacent pairs with
# real cos/sin (torchtune's cache), since litgpt's own apply_rope is the rotate-half layout.
_LITGPT_GQA_BODY = (
    "def _rope_cache(positions, n_elem, base):\n"
    "    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, device=positions.device).float() / n_elem))\n"
    "    idx_theta = torch.outer(positions.float(), theta)\n"
    "    return torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)  # (T, hs/2, 2)\n\n"
    "def _apply_rope_pairs(x, cache):\n"
    "    xs = x.float().reshape(*x.shape[:-1], -1, 2)\n"
    "    out = torch.stack([xs[..., 0] * cache[..., 0] - xs[..., 1] * cache[..., 1],\n"
    "                       xs[..., 1] * cache[..., 0] + xs[..., 0] * cache[..., 1]], -1)\n"
    "    return out.flatten(-2).type_as(x)\n\n"
    + _GQA_INIT +
    "    def forward(self, x, past_kv=None):\n"
    "        B, T, C = x.size()\n"
    "        start = 0 if past_kv is None else past_kv[0].size(2)\n"
    "        input_pos = torch.arange(start, start + T, device=x.device)\n"
    "        q = self.w_q(x).view(B, T, self.num_heads, self.d_head).transpose(1, 2)\n"
    "        k = self.w_k(x).view(B, T, self.num_kv_heads, self.d_head).transpose(1, 2)\n"
    "        v = self.w_v(x).view(B, T, self.num_kv_heads, self.d_head).transpose(1, 2)\n"
    "        cache = _rope_cache(input_pos, self.d_head, self.rope_base)\n"
    "        q, k = _apply_rope_pairs(q, cache), _apply_rope_pairs(k, cache)\n"
    "        if past_kv is not None:\n"
    "            k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)\n"
    "        present = (k, v)\n"
    "        q_per_kv = self.num_heads // self.num_kv_heads\n"
    "        if q_per_kv != 1:\n"
    "            k = k.repeat_interleave(q_per_kv, dim=1)\n"
    "            v = v.repeat_interleave(q_per_kv, dim=1)\n"
    "        total = k.size(2)\n"
    "        ones = torch.ones((total, total), device=x.device, dtype=torch.bool)\n"
    "        mask = torch.tril(ones)[total - T:]  # rows of the T newest positions\n"
    "        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0,\n"
    "                                           scale=1.0 / math.sqrt(self.d_head))\n"
    "        y = y.transpose(1, 2).reshape(B, T, C)\n"
    "        return self.w_o(y), present\n")

# HF LlamaAttention with rotate_half (GPT-NeoX layout) and HF's repeat_kv.
_HF_GQA = (
    "def _rotate_half(x):\n"
    "    x1 = x[..., : x.shape[-1] // 2]\n    x2 = x[..., x.shape[-1] // 2 :]\n"
    "    return torch.cat((-x2, x1), dim=-1)\n\n"
    "def _hf_repeat_kv(hidden_states, n_rep):\n"
    "    batch, num_key_value_heads, slen, head_dim = hidden_states.shape\n"
    "    if n_rep == 1:\n        return hidden_states\n"
    "    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)\n"
    "    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)\n\n"
    + _GQA_INIT +
    "    def forward(self, x, past_kv=None):\n"
    "        bsz, q_len, _ = x.size()\n"
    "        past_len = 0 if past_kv is None else past_kv[0].size(2)\n"
    "        position_ids = torch.arange(past_len, past_len + q_len, device=x.device)\n"
    "        query_states = self.w_q(x).view(bsz, q_len, self.num_heads, self.d_head).transpose(1, 2)\n"
    "        key_states = self.w_k(x).view(bsz, q_len, self.num_kv_heads, self.d_head).transpose(1, 2)\n"
    "        value_states = self.w_v(x).view(bsz, q_len, self.num_kv_heads, self.d_head).transpose(1, 2)\n"
    "        inv_freq = 1.0 / (self.rope_base ** (torch.arange(0, self.d_head, 2, device=x.device).float() / self.d_head))\n"
    "        freqs = torch.outer(position_ids.float(), inv_freq)\n"
    "        emb = torch.cat((freqs, freqs), dim=-1)\n"
    "        cos, sin = emb.cos(), emb.sin()\n"
    "        query_states = (query_states * cos) + (_rotate_half(query_states) * sin)\n"
    "        key_states = (key_states * cos) + (_rotate_half(key_states) * sin)\n"
    "        if past_kv is not None:\n"
    "            key_states = torch.cat([past_kv[0], key_states], dim=2)\n"
    "            value_states = torch.cat([past_kv[1], value_states], dim=2)\n"
    "        present = (key_states, value_states)\n"
    "        n_rep = self.num_heads // self.num_kv_heads\n"
    "        key_states, value_states = _hf_repeat_kv(key_states, n_rep), _hf_repeat_kv(value_states, n_rep)\n"
    "        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.d_head)\n"
    "        kv_len = key_states.size(2)\n"
    "        causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device).tril(kv_len - q_len)\n"
    "        attn_weights = attn_weights.masked_fill(~causal, torch.finfo(attn_weights.dtype).min)\n"
    "        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)\n"
    "        attn_output = torch.matmul(attn_weights, value_states)\n"
    "        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)\n"
    "        return self.w_o(attn_output), present\n")

# --- online softmax attention ----------------------------------------------------------------------
_OSA = "def online_softmax_attention(query, key, value, tile_size=64, causal=False):\n"
_OSA_CHECK = "    if tile_size < 1:\n        raise ValueError(f'tile_size must be positive, got {tile_size}')\n"
# Triton tutorial: exp2 with the scale folded into log2(e), finite -1e6 mask, lazy normalisation.
_TRITON_OSA = (
    _OSA + _OSA_CHECK +
    "    n_q, n_k = query.size(-2), key.size(-2)\n"
    "    qk_scale = (1.0 / math.sqrt(query.size(-1))) * 1.44269504  # 1/log(2)\n"
    "    m_i = torch.full(query.shape[:-1], float('-inf'), dtype=query.dtype, device=query.device)\n"
    "    l_i = torch.ones(query.shape[:-1], dtype=query.dtype, device=query.device)\n"
    "    acc = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype, device=query.device)\n"
    "    offs_m = torch.arange(n_q, device=query.device) + (n_k - n_q)\n"
    "    for start_n in range(0, n_k, tile_size):\n"
    "        k = key[..., start_n:start_n + tile_size, :]\n        v = value[..., start_n:start_n + tile_size, :]\n"
    "        qk = query @ k.transpose(-2, -1)\n"
    "        if causal:\n"
    "            offs_n = torch.arange(start_n, start_n + k.size(-2), device=query.device)\n"
    "            mask = offs_m[:, None] >= offs_n[None, :]\n"
    "            qk = qk * qk_scale + torch.where(mask, 0.0, -1.0e6)\n"
    "            m_ij = torch.maximum(m_i, qk.amax(-1))\n"
    "            qk = qk - m_ij[..., None]\n"
    "        else:\n"
    "            m_ij = torch.maximum(m_i, qk.amax(-1) * qk_scale)\n"
    "            qk = qk * qk_scale - m_ij[..., None]\n"
    "        p = torch.exp2(qk)\n"
    "        l_ij = p.sum(-1)\n"
    "        alpha = torch.exp2(m_i - m_ij)\n"
    "        l_i = l_i * alpha + l_ij\n"
    "        acc = acc * alpha[..., None]\n"
    "        acc = acc + p @ v\n"
    "        m_i = m_ij\n"
    "    return acc / l_i[..., None]\n")
# FlashAttention Algorithm 1 (the normalised output is rescaled and divided at every tile).
_FA1_OSA = (
    _OSA + _OSA_CHECK +
    "    n_q, n_k = query.size(-2), key.size(-2)\n"
    "    scale = 1.0 / math.sqrt(query.size(-1))\n"
    "    O = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype, device=query.device)\n"
    "    l = torch.zeros((*query.shape[:-1], 1), dtype=query.dtype, device=query.device)\n"
    "    m = torch.full((*query.shape[:-1], 1), float('-inf'), dtype=query.dtype, device=query.device)\n"
    "    rows = torch.arange(n_q, device=query.device)[:, None] + (n_k - n_q)\n"
    "    for block_start in range(0, n_k, tile_size):\n"
    "        Kj = key[..., block_start:block_start + tile_size, :]\n"
    "        Vj = value[..., block_start:block_start + tile_size, :]\n"
    "        Sij = query @ Kj.transpose(-2, -1) * scale\n"
    "        if causal:\n"
    "            cols = torch.arange(block_start, block_start + Kj.size(-2), device=query.device)[None, :]\n"
    "            Sij = Sij.masked_fill(cols > rows, float('-inf'))\n"
    "        mij_hat = Sij.amax(dim=-1, keepdim=True)\n"
    "        # a row whose keys in this block are all masked: use 0 so that exp gives 0, not NaN\n"
    "        mij_safe = torch.where(torch.isinf(mij_hat), torch.zeros_like(mij_hat), mij_hat)\n"
    "        pij_hat = torch.exp(Sij - mij_safe)\n"
    "        lij_hat = pij_hat.sum(dim=-1, keepdim=True)\n"
    "        mi_new = torch.maximum(m, mij_hat)\n"
    "        li_new = torch.exp(m - mi_new) * l + torch.exp(mij_safe - mi_new) * lij_hat\n"
    "        O = (l * torch.exp(m - mi_new) * O + torch.exp(mij_safe - mi_new) * (pij_hat @ Vj)) / li_new\n"
    "        l, m = li_new, mi_new\n"
    "    return O\n")
# Key by key (Milakov & Gimelshein), starting from key 0, keeping the output normalised.
_KEYWISE_OSA = (
    _OSA + _OSA_CHECK +
    "    n_q, n_k = query.size(-2), key.size(-2)\n"
    "    scale = 1.0 / math.sqrt(query.size(-1))\n"
    "    rows = torch.arange(n_q, device=query.device) + (n_k - n_q)\n"
    "    m = d = o = None\n"
    "    for start in range(0, n_k, tile_size):\n"
    "        x = query @ key[..., start:start + tile_size, :].transpose(-2, -1) * scale  # (..., L_q, tile)\n"
    "        for j in range(x.size(-1)):\n"
    "            xi = x[..., j]\n"
    "            if causal:\n"
    "                xi = xi.masked_fill(start + j > rows, float('-inf'))\n"
    "            vi = value[..., start + j, :]\n"
    "            if m is None:  # key 0, which every query sees\n"
    "                m, d, o = xi.clone(), torch.ones_like(xi), vi.unsqueeze(-2).expand(*xi.shape, vi.size(-1)).clone()\n"
    "                continue\n"
    "            m_new = torch.maximum(m, xi)\n"
    "            scale_old = torch.exp(m - m_new)\n            scale_new = torch.exp(xi - m_new)\n"
    "            d_new = d * scale_old + scale_new\n"
    "            o = (o * (d * scale_old)[..., None] + vi.unsqueeze(-2) * scale_new[..., None]) / d_new[..., None]\n"
    "            m, d = m_new, d_new\n"
    "    return o\n")

# --- DecoderBlock / DecoderLM -------------------------------------------------------------------------
_BLOCK_INIT = (
    "class DecoderBlock(nn.Module):\n"
    "    def __init__(self, d_model, num_heads, num_kv_heads, d_ff):\n        super().__init__()\n"
    "        self.attn_norm = RMSNorm(d_model)\n"
    "        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)\n"
    "        self.ffn_norm = RMSNorm(d_model)\n"
    "        self.ffn = SwiGLU(d_model, d_ff)\n\n")
_LM_HEAD = (
    "class DecoderLM(nn.Module):\n"
    "    def __init__(self, vocab_size, d_model, num_heads, num_kv_heads, d_ff, num_layers):\n"
    "        super().__init__()\n"
    "        self.embedding = nn.Embedding(vocab_size, d_model)\n"
    "        self.layers = nn.ModuleList(DecoderBlock(d_model, num_heads, num_kv_heads, d_ff)\n"
    "                                    for _ in range(num_layers))\n"
    "        self.norm = RMSNorm(d_model)\n"
    "        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)\n")
_LM_FORWARD = (
    "    def forward(self, tokens, past_kvs=None):\n"
    "        h = self.embedding(tokens)\n        presents = []\n"
    "        for i, layer in enumerate(self.layers):\n"
    "            h, present = layer(h, None if past_kvs is None else past_kvs[i])\n"
    "            presents.append(present)\n"
    "        return self.lm_head(self.norm(h)), presents\n")

# --- sampling helpers ------------------------------------------------------------------------------
# Meta's sample_top_p (sort made stable: ties rank by index), with the comparison made >= so that the nucleus is the course's (smallest
# set reaching top_p; Meta's `>` keeps one more token when the mass above equals top_p exactly).
_META_SAMPLE_TOP_P = (
    "def _sample_top_p(probs, p):\n"
    "    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True, stable=True)\n"
    "    probs_sum = torch.cumsum(probs_sort, dim=-1)\n"
    "    mask = probs_sum - probs_sort >= p\n"
    "    probs_sort[mask] = 0.0\n"
    "    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))\n"
    "    next_token = torch.multinomial(probs_sort, num_samples=1)\n"
    "    return torch.gather(probs_idx, -1, next_token)\n\n")
# HF's TopPLogitsWarper (ascending sort, remove the tail whose mass is <= 1 - top_p, keep the top).
_HF_TOPP_HELPER = (
    "def _top_p_warp(scores, top_p, filter_value=-float('Inf'), min_tokens_to_keep=1):\n"
    "    # ascending sort of the reversed vocabulary, stable: tied tokens rank by index, as the course asks\n"
    "    sorted_logits, sorted_indices = torch.sort(scores.flip(-1), descending=False, stable=True)\n"
    "    sorted_indices = scores.size(-1) - 1 - sorted_indices\n"
    "    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)\n"
    "    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)\n"
    "    sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0\n"
    "    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)\n"
    "    return scores.masked_fill(indices_to_remove, filter_value)\n\n")

# exercise -> {name: (code, source)}
CORRECT: dict[str, dict[str, tuple[str, str]]] = {
    "RMSNorm": {
        "meta_float_upcast": (
            _RMS_INIT +
            "    def _norm(self, x):\n"
            "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)\n\n"
            "    def forward(self, x):\n"
            "        output = self._norm(x.float()).type_as(x)\n"
            "        return output * self.weight\n", META_LLAMA),
        "hf_llama_variance": (
            _RMS_INIT +
            "    def forward(self, hidden_states):\n"
            "        input_dtype = hidden_states.dtype\n"
            "        hidden_states = hidden_states.to(torch.float32)\n"
            "        variance = hidden_states.pow(2).mean(-1, keepdim=True)\n"
            "        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)\n"
            "        return self.weight * hidden_states.to(input_dtype)\n", HF_LLAMA + " (LlamaRMSNorm)"),
        # Casts the result back to x's dtype (the docstring's dtype); for half inputs the reference
        # returns float32 (half times the float32 weight), so the two differ in dtype there only.
        "litgpt_mean_x_times_x": (
            _RMS_INIT +
            "    def forward(self, x):\n"
            "        dtype = x.dtype\n        x = x.float()\n"
            "        norm_x = torch.mean(x * x, dim=-1, keepdim=True)\n"
            "        x_normed = x * torch.rsqrt(norm_x + self.eps)\n"
            "        return (x_normed * self.weight.float()).to(dtype=dtype)\n", LITGPT + " (RMSNorm)"),
    },
    # The four RoPE variants compute the angles in float32 as their sources do (the reference: float64);
    # with d_head 64 and x ~ N(0, 1) they differ from it by ~1e-5 at position 100, 2e-4 at 2000, 1e-3 at 10000.
    "apply_rotary_embedding": {
        "meta_complex_polar": (
            _ROPE + _ROPE_CHECKS +
            "    freqs = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device)[: (d // 2)].float() / d))\n"
            "    freqs = torch.outer(positions.to(freqs.device).float(), freqs)\n"
            "    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64, (L, d/2)\n"
            "    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))\n"
            "    return torch.view_as_real(x_ * freqs_cis).flatten(-2).type_as(x)\n", META_LLAMA + " (precompute_freqs_cis, apply_rotary_emb)"),
        "llama2c_real_cos_sin": (
            _ROPE + _ROPE_CHECKS +
            "    freqs = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device)[: (d // 2)].float() / d))\n"
            "    freqs = torch.outer(positions.to(x.device).float(), freqs).float()\n"
            "    freqs_cos, freqs_sin = torch.cos(freqs), torch.sin(freqs)\n"
            "    x_r, x_i = x.float().reshape(x.shape[:-1] + (-1, 2)).unbind(-1)\n"
            "    out_r = x_r * freqs_cos - x_i * freqs_sin\n"
            "    out_i = x_r * freqs_sin + x_i * freqs_cos\n"
            "    return torch.stack([out_r, out_i], dim=-1).flatten(-2).type_as(x)\n", LLAMA2C + " (precompute_freqs_cis, apply_rotary_emb)"),
        "torchtune_cos_sin_cache": (
            _ROPE + _ROPE_CHECKS +
            "    theta = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device)[: (d // 2)].float() / d))\n"
            "    idx_theta = torch.einsum('i, j -> ij', positions.to(x.device).float(), theta).float()\n"
            "    rope_cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)  # (L, d/2, 2)\n"
            "    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)\n"
            "    x_out = torch.stack([\n"
            "        xshaped[..., 0] * rope_cache[..., 0] - xshaped[..., 1] * rope_cache[..., 1],\n"
            "        xshaped[..., 1] * rope_cache[..., 0] + xshaped[..., 0] * rope_cache[..., 1],\n"
            "    ], -1)\n"
            "    return x_out.flatten(-2).type_as(x)\n", TORCHTUNE),
        # lucidrains' interleaved rotate_half ('... (d r) -> ... d r') and freqs repeated '(n r)',
        # written with unflatten/repeat_interleave since einops is not installed.
        "lucidrains_interleaved_rotate_half": (
            "def _rotate_half_interleaved(x):\n"
            "    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(dim=-1)\n"
            "    return torch.stack((-x2, x1), dim=-1).flatten(-2)\n\n" +
            _ROPE + _ROPE_CHECKS +
            "    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).float() / d))\n"
            "    freqs = torch.einsum('i , j -> i j', positions.to(x.device).float(), inv_freq)\n"
            "    freqs = freqs.repeat_interleave(2, dim=-1)  # '... n -> ... (n r)', r = 2\n"
            "    out = x * freqs.cos() + _rotate_half_interleaved(x) * freqs.sin()\n"
            "    return out.type(x.dtype)\n", LUCID_ROPE),
    },
    "SwiGLU": {
        "hf_llama_mlp_act_fn": (
            _SWIGLU_INIT.replace("        self.w2 = nn.Linear(d_ff, d_model, bias=False)\n",
                                 "        self.w2 = nn.Linear(d_ff, d_model, bias=False)\n        self.act_fn = nn.SiLU()\n") +
            "    def forward(self, x):\n"
            "        return self.w2(self.act_fn(self.w1(x)) * self.w3(x))  # down(act(gate(x)) * up(x))\n",
            HF_LLAMA + " (LlamaMLP)"),
        "litgpt_llamamlp": (
            _SWIGLU_INIT +
            "    def forward(self, x):\n"
            "        x_fc_1 = self.w1(x)\n        x_fc_2 = self.w3(x)\n"
            "        x = F.silu(x_fc_1) * x_fc_2\n        return self.w2(x)\n", LITGPT + " (LLaMAMLP)"),
        # vLLM's merged gate_up projection and silu_and_mul (F.silu(x[..., :d]) * x[..., d:]).
        "vllm_merged_gate_up": (
            _SWIGLU_INIT +
            "    def forward(self, x):\n"
            "        gate_up = F.linear(x, torch.cat([self.w1.weight, self.w3.weight], dim=0))\n"
            "        d = gate_up.shape[-1] // 2\n"
            "        return self.w2(F.silu(gate_up[..., :d]) * gate_up[..., d:])\n", VLLM_MLP),
        # The version proposed in the thread: y * sigmoid(beta * y) * linear2(x), beta = 1.
        "bkitano_issue_swish_beta": (
            _SWIGLU_INIT.replace("        self.w1 =", "        self.beta = 1.0\n        self.w1 =") +
            "    def forward(self, x):\n"
            "        y = self.w1(x)\n"
            "        return self.w2(y * torch.sigmoid(self.beta * y) * self.w3(x))\n",
            "https://github.com/bkitano/llama-from-scratch/issues/7"),
    },
    "repeat_kv": {
        "hf_expand_reshape": (
            _REPEAT +
            "    batch, num_key_value_heads, slen, head_dim = x.shape\n"
            "    if n_rep == 1:\n        return x\n"
            "    x = x[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)\n"
            "    return x.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)\n", HF_LLAMA + " (repeat_kv)"),
        # Meta's repeat_kv works on (bs, slen, n_kv_heads, head_dim): transpose in and out of it.
        "meta_expand_bshd": (
            _REPEAT +
            "    x = x.transpose(1, 2)  # (bs, slen, n_kv_heads, head_dim), Meta's layout\n"
            "    bs, slen, n_kv_heads, head_dim = x.shape\n"
            "    if n_rep != 1:\n"
            "        x = x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(\n"
            "            bs, slen, n_kv_heads * n_rep, head_dim)\n"
            "    return x.transpose(1, 2)\n", META_LLAMA + " (repeat_kv)"),
        "litgpt_repeat_interleave": (
            _REPEAT + "    return x.repeat_interleave(n_rep, dim=1)  # (B, nh_q, T, hs)\n",
            LITGPT + " (CausalSelfAttention, q_per_kv)"),
    },
    "GroupedQueryAttention": {
        "meta_llama2_start_pos": (_META_GQA, META_LLAMA + "; mask of https://github.com/meta-llama/llama/pull/900"),
        "litgpt_sdpa_bool_mask": (_LITGPT_GQA_BODY, LITGPT + " (CausalSelfAttention) with " + TORCHTUNE),
    },
    "online_softmax_attention": {
        "triton_fa2_exp2": (_TRITON_OSA, TRITON_FA),
        "fa1_algorithm1_normalised": (_FA1_OSA, FA1_TORCH),
        "keywise_online_normaliser": (_KEYWISE_OSA, ONLINE_SOFTMAX),
    },
    "DecoderBlock": {
        "meta_transformer_block": (
            _BLOCK_INIT +
            "    def forward(self, x, past_kv=None):\n"
            "        attn_out, present = self.attn(self.attn_norm(x), past_kv)\n"
            "        h = x + attn_out\n"
            "        out = h + self.ffn(self.ffn_norm(h))\n"
            "        return out, present\n", META_LLAMA + " (TransformerBlock)"),
        "hf_llama_decoder_layer": (
            _BLOCK_INIT +
            "    def forward(self, hidden_states, past_kv=None):\n"
            "        residual = hidden_states\n"
            "        hidden_states = self.attn_norm(hidden_states)\n"
            "        hidden_states, present_key_value = self.attn(hidden_states, past_kv)\n"
            "        hidden_states = residual + hidden_states\n"
            "        residual = hidden_states\n"
            "        hidden_states = self.ffn_norm(hidden_states)\n"
            "        hidden_states = self.ffn(hidden_states)\n"
            "        hidden_states = residual + hidden_states\n"
            "        return hidden_states, present_key_value\n", HF_LLAMA + " (LlamaDecoderLayer)"),
        "litgpt_block": (
            _BLOCK_INIT +
            "    def forward(self, x, past_kv=None):\n"
            "        x_normed = self.attn_norm(x)\n"
            "        attention_output, present = self.attn(x_normed, past_kv)\n"
            "        x = attention_output + x\n"
            "        x = self.ffn(self.ffn_norm(x)) + x\n"
            "        return x, present\n", LITGPT + " (Block, non-parallel residual)"),
    },
    "DecoderLM": {
        "meta_transformer_tied": (
            _LM_HEAD +
            "        self.lm_head.weight = self.embedding.weight\n"
            "        nn.init.normal_(self.embedding.weight, std=0.02)\n\n" +
            "    def forward(self, tokens, past_kvs=None):\n"
            "        h = self.embedding(tokens)\n"
            "        past_kvs = [None] * len(self.layers) if past_kvs is None else past_kvs\n"
            "        presents = []\n"
            "        for layer, past in zip(self.layers, past_kvs):\n"
            "            h, present = layer(h, past)\n            presents.append(present)\n"
            "        h = self.norm(h)\n"
            "        return self.lm_head(h).float(), presents\n", META_LLAMA + " (Transformer), tied as the course asks"),
        # llama2.c ties the other way round (the embedding takes the output layer's parameter).
        "llama2c_tie_reverse": (
            _LM_HEAD +
            "        self.embedding.weight = self.lm_head.weight  # https://paperswithcode.com/method/weight-tying\n"
            "        torch.nn.init.normal_(self.embedding.weight, mean=0.0, std=0.02)\n\n" + _LM_FORWARD,
            LLAMA2C + " (Transformer.__init__)"),
        # x-transformers' tied output: logits = x @ token_emb.weight.t() (lm_head still holds the same matrix).
        "xtransformers_logits_from_embedding": (
            _LM_HEAD +
            "        self.lm_head.weight = self.embedding.weight\n"
            "        nn.init.normal_(self.embedding.weight, std=0.02)\n\n" +
            "    def forward(self, tokens, past_kvs=None):\n"
            "        x = self.embedding(tokens)\n        presents = []\n"
            "        for i, layer in enumerate(self.layers):\n"
            "            x, present = layer(x, past_kvs[i] if past_kvs is not None else None)\n"
            "            presents.append(present)\n"
            "        x = self.norm(x)\n"
            "        return x @ self.embedding.weight.t(), presents\n", X_TRANSFORMERS),
    },
    "top_p_filter": {
        # HF's ascending sort, made stable on the reversed vocabulary so that tied tokens rank by index.
        "hf_toppwarper_ascending": (
            _TOPP + _TOPP_CHECK +
            "    sorted_logits, sorted_indices = torch.sort(logits.flip(-1), descending=False, stable=True)\n"
            "    sorted_indices = logits.size(-1) - 1 - sorted_indices\n"
            "    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)\n"
            "    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)\n"
            "    sorted_indices_to_remove[..., -1:] = 0  # min_tokens_to_keep = 1\n"
            "    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)\n"
            "    return logits.masked_fill(indices_to_remove, -float('Inf'))\n", HF_TOPP + ", ties ranked by index"),
        # The gist's shift-right of the removal mask, with `>=` for the course's boundary.
        "gist_shift_right": (
            _TOPP + _TOPP_CHECK +
            "    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)\n"
            "    cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n"
            "    sorted_indices_to_remove = cumulative_probs >= top_p\n"
            "    sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()\n"
            "    sorted_indices_to_remove[..., 0] = 0\n"
            "    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)\n"
            "    return logits.masked_fill(indices_to_remove, float('-inf'))\n", GIST_TOPP + ", comparison made >="),
        # x-transformers' top_p: F.pad shifts the mask; -inf written into the sorted logits, scattered back.
        "xtransformers_fpad_scatter": (
            _TOPP + _TOPP_CHECK +
            "    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)\n"
            "    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n"
            "    sorted_indices_to_remove = cum_probs >= top_p\n"
            "    sorted_indices_to_remove = F.pad(sorted_indices_to_remove, (1, -1), value=False)\n"
            "    sorted_logits[sorted_indices_to_remove] = float('-inf')\n"
            "    return sorted_logits.scatter(-1, sorted_indices, sorted_logits)\n", X_AR + " (top_p), comparison made >="),
    },
    "sample_next_token": {
        "meta_sample_top_p": (
            _META_SAMPLE_TOP_P + _SAMPLE + _T_CHECK + _TOPP_CHECK +
            "    if temperature > 0:\n"
            "        probs = torch.softmax(logits / temperature, dim=-1)\n"
            "        next_token = _sample_top_p(probs, top_p)\n"
            "    else:\n"
            "        next_token = torch.argmax(logits, dim=-1)\n"
            "    return next_token.reshape(-1)\n", META_GEN + ", comparison made >="),
        "gumbel_max_after_hf_warper": (
            _HF_TOPP_HELPER +
            "def _log(t, eps=1e-20):\n    return torch.log(t.clamp(min=eps))\n\n"
            "def _gumbel_noise(t):\n"
            "    noise = torch.zeros_like(t).uniform_(0, 1)\n    return -_log(-_log(noise))\n\n"
            + _SAMPLE + _T_CHECK + _TOPP_CHECK +
            "    if temperature == 0:\n        return logits.argmax(dim=-1)\n"
            "    filtered = _top_p_warp(logits / temperature, top_p)\n"
            "    return (filtered + _gumbel_noise(filtered)).argmax(dim=-1)\n", MUSE_GUMBEL + " with " + HF_TOPP),
        # run.c: sort, truncate where the cumulative probability passes topp, draw r = coin * mass and
        # walk the cdf (the cutoff pre-filter (1 - topp) / (n - 1) is left out).
        "llama2c_inverse_cdf": (
            _SAMPLE + _T_CHECK + _TOPP_CHECK +
            "    if temperature == 0.0:\n        return logits.argmax(dim=-1)\n"
            "    probs = torch.softmax(logits.float() / temperature, dim=-1)\n"
            "    prob_sorted, index_sorted = torch.sort(probs, dim=-1, descending=True, stable=True)\n"
            "    cumulative = prob_sorted.cumsum(dim=-1)\n"
            "    kept = torch.where(cumulative - prob_sorted < top_p, prob_sorted, torch.zeros_like(prob_sorted))\n"
            "    cdf = kept.cumsum(dim=-1)\n"
            "    coin = torch.rand(probs.shape[:-1] + (1,), device=probs.device)\n"
            "    r = coin * cdf[..., -1:]\n"
            "    i = torch.searchsorted(cdf, r, right=True).clamp(max=probs.size(-1) - 1)\n"
            "    return index_sorted.gather(-1, i).squeeze(-1)\n", LLAMA2C_RUN),
    },
    "generate": {
        # Meta's loop: a token buffer, prev_pos/cur_pos, the model fed tokens[prev_pos:cur_pos] and the cache.
        "meta_prev_pos_loop": (
            _META_SAMPLE_TOP_P + _GEN + _T_CHECK +
            "    bsz, prompt_len = prompt.shape\n"
            "    total_len = prompt_len + max_new_tokens\n"
            "    tokens = torch.zeros((bsz, total_len), dtype=torch.long, device=prompt.device)\n"
            "    tokens[:, :prompt_len] = prompt\n"
            "    prev_pos, past = 0, None\n"
            "    for cur_pos in range(prompt_len, total_len):\n"
            "        logits, past = model(tokens[:, prev_pos:cur_pos], past)\n"
            "        logits = logits[:, -1]\n"
            "        if temperature > 0:\n"
            "            probs = torch.softmax(logits / temperature, dim=-1)\n"
            "            next_token = _sample_top_p(probs, top_p)\n"
            "        else:\n"
            "            next_token = torch.argmax(logits, dim=-1)\n"
            "        tokens[:, cur_pos] = next_token.reshape(-1)\n"
            "        prev_pos = cur_pos\n"
            "    return tokens\n", META_GEN + " (sample_top_p comparison made >=)"),
        # HF's sampling loop: input_ids[:, -1:] once there is a cache, logits warped by temperature then top-p.
        "hf_sample_loop": (
            _HF_TOPP_HELPER + _GEN + _T_CHECK + _TOPP_CHECK +
            "    input_ids = prompt\n    past_key_values = None\n"
            "    for _ in range(max_new_tokens):\n"
            "        model_inputs = input_ids if past_key_values is None else input_ids[:, -1:]\n"
            "        logits, past_key_values = model(model_inputs, past_key_values)\n"
            "        next_token_logits = logits[:, -1, :]\n"
            "        if temperature == 0:\n"
            "            next_tokens = torch.argmax(next_token_logits, dim=-1)\n"
            "        else:\n"
            "            next_token_scores = _top_p_warp(next_token_logits / temperature, top_p)\n"
            "            probs = F.softmax(next_token_scores, dim=-1)\n"
            "            next_tokens = torch.multinomial(probs, num_samples=1).squeeze(1)\n"
            "        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)\n"
            "    return input_ids\n", HF_SAMPLE + " with " + HF_TOPP),
    },
}

# exercise -> {name: (code, source: the issue or pull request that reports it, words)}
MISTAKES: dict[str, dict[str, tuple[str, str, str]]] = {
    "RMSNorm": {
        # Divides by rsqrt(...) instead of multiplying: x * RMS(x) rather than x / RMS(x).
        "llmfoundry_divide_by_rsqrt": (
            _RMS_INIT +
            "    def forward(self, x):\n"
            "        output = x / torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)\n"
            "        return output * self.weight\n", "https://github.com/mosaicml/llm-foundry/issues/371", ""),
        # eps added to the RMS outside the square root (x / (rms + eps)); visible only for inputs of
        # small magnitude (rms comparable to sqrt(eps)).
        "olmo_eps_outside_sqrt": (
            _RMS_INIT +
            "    def forward(self, x):\n"
            "        norm_x = x.norm(2, dim=-1, keepdim=True)\n"
            "        rms_x = norm_x * x.size(-1) ** (-1.0 / 2)\n"
            "        x_normed = x / (rms_x + self.eps)\n"
            "        return self.weight * x_normed\n", "https://github.com/allenai/OLMo/issues/281", ""),
        # The fused built-in (torch.nn.functional.rms_norm, what nn.RMSNorm calls): same numbers,
        # but the exercise asks to write the normalisation (cf. the own catalogue's layer_norm built-in).
        "torch_builtin_rms_norm": (
            _RMS_INIT +
            "    def forward(self, x):\n"
            "        return F.rms_norm(x, (x.size(-1),), self.weight, self.eps)\n",
            "https://github.com/pytorch/pytorch/pull/133085 (nn.RMSNorm, the fused built-in)", ""),
    },
    "apply_rotary_embedding": {
        # A different convention: rotates pairs (i, i + d/2) (GPT-NeoX / HF rotate_half), not the
        # course's adjacent pairs (2i, 2i+1); HF permutes the q/k weights of Meta's checkpoints to match.
        "hf_rotate_half": (
            "def _rotate_half(x):\n"
            "    x1 = x[..., : x.shape[-1] // 2]\n    x2 = x[..., x.shape[-1] // 2 :]\n"
            "    return torch.cat((-x2, x1), dim=-1)\n\n" + _ROPE + _ROPE_CHECKS +
            "    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))\n"
            "    freqs = torch.outer(positions.float(), inv_freq)\n"
            "    emb = torch.cat((freqs, freqs), dim=-1)\n"
            "    return ((x * emb.cos()) + (_rotate_half(x) * emb.sin())).to(x.dtype)\n",
            "https://github.com/huggingface/transformers/issues/25199", ""),
        # Same rotate-half layout, litgpt's apply_rope (cos/sin of (T, head_size), halves swapped).
        "litgpt_apply_rope_halves": (
            _ROPE + _ROPE_CHECKS +
            "    theta = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))\n"
            "    idx_theta = torch.outer(positions.float(), theta).repeat(1, 2)\n"
            "    cos, sin = torch.cos(idx_theta), torch.sin(idx_theta)\n"
            "    head_size_half = x.size(-1) // 2\n"
            "    x1 = x[..., :head_size_half]\n    x2 = x[..., head_size_half:]\n"
            "    rotated = torch.cat((-x2, x1), dim=-1)\n"
            "    return ((x * cos) + (rotated * sin)).to(dtype=x.dtype)\n",
            "https://github.com/rasbt/LLMs-from-scratch/pull/747 (litgpt's rotate-half RoPE vs Meta's interleaved weights)", ""),
        # Ignores `positions` and rotates the L tokens as positions 0 .. L-1 (llama2.c's
        # freqs_cos[:seqlen], which has no cache); with a cache the new tokens get position 0's angles.
        "llama2c_positions_from_zero": (
            _ROPE + _ROPE_CHECKS +
            "    seqlen = x.size(-2)\n"
            "    freqs = 1.0 / (base ** (torch.arange(0, d, 2)[: (d // 2)].float() / d))\n"
            "    t = torch.arange(seqlen)\n"
            "    freqs = torch.outer(t, freqs).float()\n"
            "    freqs_cos, freqs_sin = torch.cos(freqs), torch.sin(freqs)\n"
            "    x_r, x_i = x.float().reshape(x.shape[:-1] + (-1, 2)).unbind(-1)\n"
            "    out = torch.stack([x_r * freqs_cos - x_i * freqs_sin, x_r * freqs_sin + x_i * freqs_cos], dim=-1)\n"
            "    return out.flatten(-2).type_as(x)\n",
            "https://github.com/huggingface/nanoVLM/pull/71 (position ids for the kv-cache: RoPE must use the offset)", ""),
    },
    "SwiGLU": {
        # SiLU on the wrong branch: silu(w3 x) * w1 x instead of silu(w1 x) * w3 x.
        "mlx_swapped_gate": (
            _SWIGLU_INIT +
            "    def forward(self, x):\n"
            "        return self.w2(F.silu(self.w3(x)) * self.w1(x))\n", "https://github.com/ml-explore/mlx-lm/pull/767", ""),
        # 'swiglu' mapped to plain SiLU: no gate, w3 unused.
        "timesfm_plain_silu": (
            _SWIGLU_INIT +
            "    def forward(self, x):\n"
            "        return self.w2(F.silu(self.w1(x)))\n", "https://github.com/google-research/timesfm/issues/493", ""),
        # GEGLU (GELU gate) instead of SwiGLU.
        "muse_geglu": (
            _SWIGLU_INIT +
            "    def forward(self, x):\n"
            "        x_, gate = self.w3(x), self.w1(x)\n"
            "        return self.w2(F.gelu(gate) * x_)\n",
            "https://github.com/lucidrains/muse-maskgit-pytorch (muse_maskgit_pytorch.py, GEGLU: gate * F.gelu(x))", ""),
    },
    "repeat_kv": {
        # Tiles the heads (h0, h1, h0, h1) instead of repeating each next to itself (h0, h0, h1, h1).
        "onnx_tile": (
            _REPEAT + "    return x.repeat(1, n_rep, 1, 1)\n", "https://github.com/onnx/onnx/pull/7274", ""),
        # repeat_kv written for (B, L, h, d) applied to (B, h, L, d): repeats along the sequence axis.
        "veomni_wrong_axis": (
            _REPEAT + "    return torch.repeat_interleave(x, dim=2, repeats=n_rep)\n",
            "https://github.com/ByteDance-Seed/VeOmni/pull/162", ""),
    },
    "GroupedQueryAttention": {
        # New tokens always rotated from position 0, cache or not.
        "nanovlm_positions_from_zero": (
            _LITGPT_GQA_BODY.replace(
                "        input_pos = torch.arange(start, start + T, device=x.device)\n",
                "        input_pos = torch.arange(T, device=x.device)\n"),
            "https://github.com/huggingface/nanoVLM/pull/71", ""),
        # is_causal=True with a cache: torch aligns the causal mask upper-left, so one new query sees
        # key 0 only (the course's mask is aligned lower-right).
        "sdpa_is_causal_upper_left": (
            _LITGPT_GQA_BODY.replace(
                "        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0,\n",
                "        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.0,\n"),
            "https://github.com/pytorch/pytorch/issues/103082", ""),
        # Key/value heads tiled with .repeat instead of repeat_interleave: query head j reads kv head j % h_kv.
        "onnx_tile_heads": (
            _LITGPT_GQA_BODY.replace(
                "            k = k.repeat_interleave(q_per_kv, dim=1)\n            v = v.repeat_interleave(q_per_kv, dim=1)\n",
                "            k = k.repeat(1, q_per_kv, 1, 1)\n            v = v.repeat(1, q_per_kv, 1, 1)\n"),
            "https://github.com/onnx/onnx/pull/7274", ""),
        # HF's rotate_half RoPE (pairs (i, i + d/2)): a different convention from the course's adjacent pairs.
        "hf_rotate_half_attention": (_HF_GQA, "https://github.com/huggingface/transformers/issues/25199", ""),
    },
    "online_softmax_attention": {
        # New maximum taken from the tile alone, not max(running, tile): exact on paper, but exp(m_old - m_new)
        # overflows when a later tile's scores are far below the earlier ones.
        "tilelang_tile_max_only": (
            _OSA + _OSA_CHECK +
            "    n_q, n_k = query.size(-2), key.size(-2)\n"
            "    scale = 1.0 / math.sqrt(query.size(-1))\n"
            "    scores_max = torch.full((*query.shape[:-1], 1), float('-inf'), dtype=query.dtype, device=query.device)\n"
            "    logsum = torch.zeros((*query.shape[:-1], 1), dtype=query.dtype, device=query.device)\n"
            "    acc_o = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype, device=query.device)\n"
            "    rows = torch.arange(n_q, device=query.device)[:, None] + (n_k - n_q)\n"
            "    for start in range(0, n_k, tile_size):\n"
            "        acc_s = query @ key[..., start:start + tile_size, :].transpose(-2, -1) * scale\n"
            "        if causal:\n"
            "            cols = torch.arange(start, start + acc_s.size(-1), device=query.device)[None, :]\n"
            "            acc_s = acc_s.masked_fill(cols > rows, float('-inf'))\n"
            "        scores_max_prev = scores_max\n"
            "        scores_max = acc_s.amax(dim=-1, keepdim=True)  # the tile's max only\n"
            "        scores_max = torch.where(torch.isinf(scores_max), scores_max_prev, scores_max)\n"
            "        scores_scale = torch.exp(scores_max_prev - scores_max)\n"
            "        p = torch.exp(acc_s - scores_max)\n"
            "        logsum = logsum * scores_scale + p.sum(dim=-1, keepdim=True)\n"
            "        acc_o = acc_o * scores_scale + p @ value[..., start:start + tile_size, :]\n"
            "    return acc_o / logsum\n", "https://github.com/tile-ai/tilelang/pull/1148", ""),
        # Causal mask aligned for L_q == L_k (query i sees keys 0 .. i), as the Triton tutorial's
        # offs_m >= offs_n; wrong when the queries are the last L_q of L_k keys.
        "triton_square_causal": (
            _TRITON_OSA.replace("    offs_m = torch.arange(n_q, device=query.device) + (n_k - n_q)\n",
                                "    offs_m = torch.arange(n_q, device=query.device)\n"),
            TRITON_FA + " (mask offs_m >= start_n + offs_n assumes equal lengths; cf. https://github.com/pytorch/pytorch/issues/103082)", ""),
    },
    "DecoderBlock": {
        # The residual is taken after the norm: norm_x + attn(norm_x) instead of x + attn(norm(x)).
        "howuhh_residual_from_normed": (
            _BLOCK_INIT +
            "    def forward(self, x, past_kv=None):\n"
            "        x = self.attn_norm(x)\n"
            "        h, present = self.attn(x, past_kv)\n"
            "        x = x + h\n"
            "        x = self.ffn_norm(x)\n"
            "        return x + self.ffn(x), present\n", "https://github.com/Howuhh/faster-trajectory-transformer/issues/3", ""),
        # GPT-NeoX's parallel residual: x + attn(norm1(x)) + ffn(norm2(x)), the FFN does not see the attention output.
        "neox_parallel_residual": (
            _BLOCK_INIT +
            "    def forward(self, x, past_kv=None):\n"
            "        attn_output, present = self.attn(self.attn_norm(x), past_kv)\n"
            "        mlp_output = self.ffn(self.ffn_norm(x))\n"
            "        return mlp_output + attn_output + x, present\n",
            "https://github.com/huggingface/transformers (src/transformers/models/gpt_neox/modeling_gpt_neox.py, use_parallel_residual)", ""),
        # The residual inside the sub-layer's argument: attn(norm(x) + x) instead of attn(norm(x)) + x.
        "pml_book_residual_inside": (
            _BLOCK_INIT +
            "    def forward(self, x, past_kv=None):\n"
            "        x, present = self.attn(self.attn_norm(x) + x, past_kv)\n"
            "        return self.ffn(self.ffn_norm(x) + x), present\n", "https://github.com/probml/pml-book/issues/709", ""),
    },
    "DecoderLM": {
        # No tying: the output layer keeps its own matrix.
        "mosaic_untied": (
            _LM_HEAD + "        nn.init.normal_(self.embedding.weight, std=0.02)\n\n" + _LM_FORWARD,
            "https://github.com/mosaicml/examples/pull/11", ""),
        # The embedding copied into the output layer, not shared: equal at init, apart after one step.
        "rasbt_copied_not_shared": (
            _LM_HEAD + "        nn.init.normal_(self.embedding.weight, std=0.02)\n"
            "        self.lm_head.weight = nn.Parameter(self.embedding.weight.detach().clone())\n\n" + _LM_FORWARD,
            "https://github.com/rasbt/LLMs-from-scratch/issues/822", ""),
    },
    "top_p_filter": {
        # HF's TopPLogitsWarper as written: the ascending sort ranks tied tokens the other way round, so at
        # the boundary it keeps the tied token of highest index, not lowest; differs only with ties.
        "hf_toppwarper_tie_order": (
            _TOPP + _TOPP_CHECK +
            "    sorted_logits, sorted_indices = torch.sort(logits, descending=False)\n"
            "    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)\n"
            "    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)\n"
            "    sorted_indices_to_remove[..., -1:] = 0\n"
            "    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)\n"
            "    return logits.masked_fill(indices_to_remove, -float('Inf'))\n", HF_TOPP, ""),
        # Keeps the tokens whose cumulative probability (themselves included) is <= top_p: drops the token
        # that crosses the threshold, so the nucleus holds less than top_p.
        "rasbt_cumsum_le_top_p": (
            _TOPP + _TOPP_CHECK +
            "    sorted_logits, sorted_idx = torch.sort(logits, dim=-1, descending=True)\n"
            "    cumprobas = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1)\n"
            "    keep = cumprobas <= top_p\n"
            "    keep[..., 0] = True\n"
            "    sorted_logits = sorted_logits.masked_fill(~keep, float('-inf'))\n"
            "    return torch.full_like(logits, float('-inf')).scatter(-1, sorted_idx, sorted_logits)\n",
            "https://github.com/rasbt/reasoning-from-scratch/issues/164", ""),
        # Threshold read as 1 - top_p (the nucleus of mass 1 - top_p).
        "xtransformers_one_minus_thres": (
            _TOPP + _TOPP_CHECK +
            "    sorted_logits, sorted_indices = torch.sort(logits, descending=True)\n"
            "    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n"
            "    sorted_indices_to_remove = cum_probs > (1 - top_p)\n"
            "    sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()\n"
            "    sorted_indices_to_remove[..., 0] = 0\n"
            "    sorted_logits[sorted_indices_to_remove] = float('-inf')\n"
            "    return sorted_logits.scatter(-1, sorted_indices, sorted_logits)\n",
            "https://github.com/lucidrains/x-transformers/issues/184", ""),
        # The gist as written (`>`): keeps one token too many when the mass above a token equals top_p
        # exactly (e.g. 4 equal logits, top_p = 0.5 keeps 3); differs only at that boundary.
        "gist_boundary_gt": (
            _TOPP + _TOPP_CHECK +
            "    sorted_logits, sorted_indices = torch.sort(logits, descending=True)\n"
            "    cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n"
            "    sorted_indices_to_remove = cumulative_probs > top_p\n"
            "    sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()\n"
            "    sorted_indices_to_remove[..., 0] = 0\n"
            "    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)\n"
            "    return logits.masked_fill(indices_to_remove, float('-inf'))\n", GIST_TOPP, ""),
    },
    "sample_next_token": {
        # Top-p on the raw logits, temperature applied afterwards (x-transformers' generate order).
        "xtransformers_temperature_after_top_p": (
            "def _top_p(logits, thres=0.9):\n"
            "    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)\n"
            "    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n"
            "    remove = F.pad(cum_probs >= thres, (1, -1), value=False)\n"
            "    sorted_logits[remove] = float('-inf')\n"
            "    return sorted_logits.scatter(-1, sorted_indices, sorted_logits)\n\n" +
            _SAMPLE + _T_CHECK + _TOPP_CHECK +
            "    if temperature == 0:\n        return logits.argmax(dim=-1)\n"
            "    filtered_logits = _top_p(logits, thres=top_p)\n"
            "    probs = F.softmax(filtered_logits / temperature, dim=-1)\n"
            "    return torch.multinomial(probs, 1).squeeze(-1)\n",
            X_AR + "; fixed in HF by https://github.com/huggingface/transformers/pull/8686", ""),
    },
    "generate": {
        # The whole sequence fed again at every step together with the cache: keys duplicated, positions shifted.
        "hf1749_full_ids_with_past": (
            _GEN + _T_CHECK +
            "    input_ids = prompt\n    past = None\n"
            "    for _ in range(max_new_tokens):\n"
            "        logits, past = model(input_ids, past)\n"
            "        logits = logits[:, -1]\n"
            "        if temperature == 0:\n            next_token = logits.argmax(dim=-1)\n"
            "        else:\n"
            "            probs = torch.softmax(logits / temperature, dim=-1)\n"
            "            next_token = torch.multinomial(probs, 1).squeeze(-1)\n"
            "        input_ids = torch.cat([input_ids, next_token.view(-1, 1)], dim=1)\n"
            "    return input_ids\n", "https://github.com/huggingface/transformers/issues/1749", ""),
        # x-transformers' generate order: filter the raw logits, then divide by the temperature.
        "xtransformers_filter_then_temperature": (
            "def _top_p(logits, thres=0.9):\n"
            "    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)\n"
            "    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n"
            "    remove = F.pad(cum_probs >= thres, (1, -1), value=False)\n"
            "    sorted_logits[remove] = float('-inf')\n"
            "    return sorted_logits.scatter(-1, sorted_indices, sorted_logits)\n\n" +
            _GEN + _T_CHECK + _TOPP_CHECK +
            "    out = prompt\n    cache = None\n    x = prompt\n"
            "    for _ in range(max_new_tokens):\n"
            "        logits, cache = model(x, cache)\n"
            "        logits = logits[:, -1]\n"
            "        if temperature == 0:\n            sample = logits.argmax(dim=-1, keepdim=True)\n"
            "        else:\n"
            "            filtered_logits = _top_p(logits, thres=top_p)\n"
            "            probs = F.softmax(filtered_logits / temperature, dim=-1)\n"
            "            sample = torch.multinomial(probs, 1)\n"
            "        out = torch.cat((out, sample), dim=-1)\n"
            "        x = sample\n"
            "    return out\n", X_AR, ""),
    },
}


# What each mistake's feedback must contain: the name of the mistake, or where it is.
_WORDS = {
    "RMSNorm": {"llmfoundry_divide_by_rsqrt": "multiplied by its root mean square",
                "olmo_eps_outside_sqrt": "outside the square root"},
    "apply_rotary_embedding": {"hf_rotate_half": "rotate_half", "litgpt_apply_rope_halves": "rotate_half",
                               "llama2c_positions_from_zero": "positions given are ignored"},
    "SwiGLU": {"mlx_swapped_gate": "SiLU is applied to w3(x)", "timesfm_plain_silu": "there is no gate",
               "muse_geglu": "GELU is used"},
    "repeat_kv": {"onnx_tile": "repeated as a whole", "veomni_wrong_axis": "has shape"},
    "GroupedQueryAttention": {"nanovlm_positions_from_zero": "rotated as positions 0",
                              "sdpa_is_causal_upper_left": "not shifted", "onnx_tile_heads": "whole list",
                              "hf_rotate_half_attention": "rotate_half"},
    "online_softmax_attention": {"tilelang_tile_max_only": "max(m_old", "triton_square_causal": "LAST L_q positions"},
    "DecoderBlock": {"howuhh_residual_from_normed": "replaces the residual stream",
                     "neox_parallel_residual": "parallel block", "pml_book_residual_inside": "sub-layer's input"},
    "DecoderLM": {"mosaic_untied": "tie them", "rasbt_copied_not_shared": "COPY"},
    "top_p_filter": {"rasbt_cumsum_le_top_p": "crosses top_p is dropped", "xtransformers_one_minus_thres": "1 - top_p",
                     "gist_boundary_gt": "one token too many"},
    "sample_next_token": {"xtransformers_temperature_after_top_p": "after top_p chose"},
    "generate": {"hf1749_full_ids_with_past": "counted twice", "xtransformers_filter_then_temperature": "after top_p chose"},
}
# Not graded as mistakes, so left out: the built-in F.rms_norm computes the same numbers (the notebook shows
# nn.RMSNorm next to the exercise); the order of tied tokens that straddle the edge of the nucleus is a
# convention the hidden tests avoid. (An exact edge, where a cumulative sum equals top_p, is tested: the
# notebook's text defines it, and probabilities 1/2, 1/4, 1/8 make it exact.)
for _exercise, _name in [("RMSNorm", "torch_builtin_rms_norm"), ("top_p_filter", "hf_toppwarper_tie_order")]:
    del MISTAKES[_exercise][_name]
MISTAKES = {exercise: {name: (code, source, _WORDS[exercise][name]) for name, (code, source, _) in entries.items()}
            for exercise, entries in MISTAKES.items()}

# Gathered later (issue 39) by a helper with a fresh context, from issue threads and pull requests of other
# projects; before the checks named them, 5 had full marks and 12 a message that did not say what was wrong.
_LATER_GQA_FORWARD = (  # the forward pass the GQA entries below share, up to the rotation
    '    def forward(self, x, past_kv=None):\n'
    '        B, L, D = x.shape\n'
    '        start_pos = 0 if past_kv is None else past_kv[0].size(2)\n'
    '        q = self.w_q(x).view(B, L, self.num_heads, self.d_head).transpose(1, 2)\n'
    '        k = self.w_k(x).view(B, L, self.num_kv_heads, self.d_head).transpose(1, 2)\n'
    '        v = self.w_v(x).view(B, L, self.num_kv_heads, self.d_head).transpose(1, 2)\n'
    '        pos = torch.arange(start_pos, start_pos + L, device=x.device)\n'
    '        q = apply_rotary_embedding(q, pos, self.rope_base)\n'
    '        k = apply_rotary_embedding(k, pos, self.rope_base)\n'
)
_LATER = {
    'RMSNorm': {
        'zeta_normalize_times_inverse_scale': (_RMS_INIT + (
            '    def forward(self, x):\n'
            '        scale = x.size(-1) ** -0.5\n'
            '        normed = F.normalize(x, dim=-1)\n'
            '        return normed * scale * self.weight\n'
        ), 'https://github.com/kyegomez/zeta/issues/180 (zeta/nn/modules/rms_norm.py: normed * self.scale, scale = dim ** -0.5)', 'multiplied by 1/sqrt(d)'),
        'zeta_normalize_dim_minus2': (_RMS_INIT + (
            '    def forward(self, x):\n'
            '        normed = F.normalize(x, dim=-2)  # zeta: dim=-2\n'
            '        return normed * x.size(-1) ** 0.5 * self.weight\n'
        ), "https://github.com/kyegomez/zeta/issues/180 (second point: 'the normalization should be in the dim -1, not -2')", 'over axis -2'),
        'mold_gemma_one_plus_weight': (_RMS_INIT + (
            '    def forward(self, x):\n'
            '        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)\n'
            '        output = output * (1.0 + self.weight.float())  # Gemma: weight stored as an offset from one\n'
            '        return output.type_as(x)\n'
        ), "https://github.com/utensils/mold/issues/1074 (RMSNorm '(w + 1)' applied to weights that already are the gain); convention: https://github.com/linkedin/Liger-Kernel/issues/74", '(1 + weight)'),
        'nanovllm_inplace_mul': (_RMS_INIT + (
            '    def forward(self, x):\n'
            '        orig_dtype = x.dtype\n'
            '        x = x.float()  # the same tensor when x is already float32\n'
            '        var = x.pow(2).mean(dim=-1, keepdim=True)\n'
            '        x.mul_(torch.rsqrt(var + self.eps))\n'
            '        x = x.to(orig_dtype).mul_(self.weight)\n'
            '        return x\n'
        ), 'https://github.com/GeeeekExplorer/nano-vllm/issues/170', 'in-place operation'),
    },
    'apply_rotary_embedding': {
        'neox_angles_in_model_dtype': (_ROPE + _ROPE_CHECKS + (
            '    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).float() / d))\n'
            '    inv_freq = inv_freq.to(x.dtype)  # a buffer: .half()/.bfloat16() on the model converts it\n'
            '    t = positions.to(x.device).type_as(inv_freq)\n'
            "    freqs = torch.einsum('i,j->ij', t, inv_freq)\n"
            '    cos, sin = freqs.cos(), freqs.sin()\n'
            '    a, b = x[..., 0::2], x[..., 1::2]\n'
            '    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)\n'
        ), 'https://github.com/EleutherAI/gpt-neox/issues/1003; https://github.com/huggingface/transformers/issues/29496', 'angles are computed in bfloat16'),
        'sglang_inv_freq_quantised': (_ROPE + _ROPE_CHECKS + (
            '    inv_freq_np = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))\n'
            '    inv_freq = inv_freq_np.to(device=x.device, dtype=x.dtype)\n'
            "    freqs = torch.einsum('n,d->nd', positions.to(x.device).float(), inv_freq)  # promoted to float32\n"
            '    cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)\n'
            '    a, b = x[..., 0::2], x[..., 1::2]\n'
            '    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)\n'
        ), 'https://github.com/sgl-project/sglang-jax/issues/1472', 'frequencies are rounded'),
    },
    'SwiGLU': {
        'minimind_silu_of_product': (_SWIGLU_INIT + (
            '    def forward(self, x):\n'
            '        return self.w2(F.silu(self.w1(x) * self.w3(x)))\n'
        ), 'https://github.com/Nijikadesu/breakdown-minimind/issues/3', 'SiLU is applied after the product'),
    },
    'repeat_kv': {
        'onnxim_divide_by_num_kv_heads': (_REPEAT + (
            '    num_kv_heads = x.size(1)\n'
            '    head_idx = torch.arange(num_kv_heads * n_rep, device=x.device)\n'
            '    kv_head_idx = head_idx // num_kv_heads\n'
            '    return x.index_select(1, kv_head_idx)\n'
        ), 'https://github.com/PSAL-POSTECH/ONNXim/pull/34', 'j // h_kv'),
    },
    'GroupedQueryAttention': {
        'meta_square_mask_with_cache': (_GQA_INIT + _LATER_GQA_FORWARD + (
            '        if past_kv is not None:\n'
            '            k = torch.cat([past_kv[0], k], dim=2)\n'
            '            v = torch.cat([past_kv[1], v], dim=2)\n'
            '        present = (k, v)\n'
            '        n_rep = self.num_heads // self.num_kv_heads\n'
            '        keys, values = repeat_kv(k, n_rep), repeat_kv(v, n_rep)\n'
            '        scores = q @ keys.transpose(-2, -1) / math.sqrt(self.d_head)\n'
            '        if L > 1:\n'
            "            mask = torch.full((1, 1, L, L), float('-inf'), device=x.device)\n"
            '            mask = torch.triu(mask, diagonal=start_pos + 1).type_as(x)\n'
            '            scores = scores + mask\n'
            '        out = scores.softmax(dim=-1) @ values\n'
            '        out = out.transpose(1, 2).reshape(B, L, D)\n'
            '        return self.w_o(out), present\n'
        ), 'https://github.com/meta-llama/llama/issues/899', 'must match the size'),
        'headkv_cache_after_repeat_kv': (_GQA_INIT + _LATER_GQA_FORWARD + (
            '        n_rep = self.num_heads // self.num_kv_heads\n'
            '        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # [SnapKV] moved ahead of the cache\n'
            '        if past_kv is not None and past_kv[0].size(1) != k.size(1):\n'
            '            past_kv = (repeat_kv(past_kv[0], n_rep), repeat_kv(past_kv[1], n_rep))\n'
            '        if past_kv is not None:\n'
            '            k = torch.cat([past_kv[0], k], dim=2)\n'
            '            v = torch.cat([past_kv[1], v], dim=2)\n'
            '        present = (k, v)\n'
            '        n_rep = self.num_heads // self.num_kv_heads\n'
            '        keys, values = k, v\n'
            '        scores = q @ keys.transpose(-2, -1) / math.sqrt(self.d_head)\n'
            '        mask = torch.ones(L, start_pos + L, dtype=torch.bool, device=x.device).tril(start_pos)\n'
            "        out = scores.masked_fill(~mask, float('-inf')).softmax(dim=-1) @ values\n"
            '        out = out.transpose(1, 2).reshape(B, L, D)\n'
            '        return self.w_o(out), present\n'
        ), 'https://github.com/FYYFU/HeadKV/issues/3', 'key cache has shape'),
        'tinytorch_step_excludes_own_keys': (_GQA_INIT + _LATER_GQA_FORWARD + (
            '        if past_kv is not None:\n'
            '            k = torch.cat([past_kv[0], k], dim=2)\n'
            '            v = torch.cat([past_kv[1], v], dim=2)\n'
            '        present = (k, v)\n'
            '        n_rep = self.num_heads // self.num_kv_heads\n'
            '        if past_kv is not None:\n'
            '            keys, values = repeat_kv(past_kv[0], n_rep), repeat_kv(past_kv[1], n_rep)  # history only\n'
            '            out = (q @ keys.transpose(-2, -1) / math.sqrt(self.d_head)).softmax(dim=-1) @ values\n'
            '        else:\n'
            '            keys, values = repeat_kv(k, n_rep), repeat_kv(v, n_rep)\n'
            '            scores = q @ keys.transpose(-2, -1) / math.sqrt(self.d_head)\n'
            '            mask = torch.ones(L, start_pos + L, dtype=torch.bool, device=x.device).tril(start_pos)\n'
            "            scores = scores.masked_fill(~mask, float('-inf'))\n"
            '            out = scores.softmax(dim=-1) @ values\n'
            '        out = out.transpose(1, 2).reshape(B, L, D)\n'
            '        return self.w_o(out), present\n'
        ), 'https://github.com/harvard-edge/cs249r_book/pull/1953', 'cached keys only'),
        'rasbt_sdpa_triu_bool_mask': (_GQA_INIT + _LATER_GQA_FORWARD + (
            '        if past_kv is not None:\n'
            '            k = torch.cat([past_kv[0], k], dim=2)\n'
            '            v = torch.cat([past_kv[1], v], dim=2)\n'
            '        present = (k, v)\n'
            '        n_rep = self.num_heads // self.num_kv_heads\n'
            '        attn_mask = torch.triu(torch.ones(L, start_pos + L, device=x.device), diagonal=start_pos + 1).bool()\n'
            '        out = F.scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), attn_mask=attn_mask)\n'
            '        out = out.transpose(1, 2).reshape(B, L, D)\n'
            '        return self.w_o(out), present\n'
        ), 'https://github.com/rasbt/LLMs-from-scratch/issues/1061', 'mask is inverted'),
    },
    'online_softmax_attention': {
        'pallas_padded_tile_unmasked': (_OSA + _OSA_CHECK + (
            '    n_q, n_k = query.size(-2), key.size(-2)\n'
            '    pad = (-n_k) % tile_size\n'
            '    if pad:  # round L_k up to a whole number of tiles\n'
            '        key = F.pad(key, (0, 0, 0, pad))\n'
            '        value = F.pad(value, (0, 0, 0, pad))\n'
            '    scale = 1.0 / math.sqrt(query.size(-1))\n'
            "    m = torch.full((*query.shape[:-1], 1), float('-inf'), dtype=query.dtype)\n"
            '    l = torch.zeros_like(m)\n'
            '    acc = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype)\n'
            '    rows = torch.arange(n_q)[:, None] + (n_k - n_q)\n'
            '    for s in range(0, key.size(-2), tile_size):\n'
            '        kt, vt = key[..., s:s + tile_size, :], value[..., s:s + tile_size, :]\n'
            '        sc = query @ kt.transpose(-2, -1) * scale\n'
            '        if causal:\n'
            "            sc = sc.masked_fill(torch.arange(s, s + tile_size)[None, :] > rows, float('-inf'))\n"
            '        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))\n'
            '        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)\n'
            '        c = torch.exp(m - m_safe)\n'
            '        p = torch.exp(sc - m_safe)\n'
            '        l = l * c + p.sum(-1, keepdim=True)\n'
            '        acc = acc * c + p @ vt\n'
            '        m = m_new\n'
            '    return acc / l\n'
        ), 'https://github.com/jax-ml/jax/issues/27224; https://github.com/66RING/tiny-flash-attention/issues/12', 'padded with zeros'),
    },
    'DecoderBlock': {
        'bitnet_x_plus_x': (_BLOCK_INIT + (
            '    def forward(self, x, past_kv=None):\n'
            '        x, present = self.attn(self.attn_norm(x), past_kv)\n'
            '        x = x + x\n'
            '        x = self.ffn(self.ffn_norm(x)) + x\n'
            '        return x, present\n'
        ), 'https://github.com/kyegomez/BitNet/issues/32', 'added to itself'),
        'navit_normed_before_mlp_residual': (_BLOCK_INIT + (
            '    def forward(self, x, past_kv=None):\n'
            '        h, present = self.attn(self.attn_norm(x), past_kv)\n'
            '        x = h + x\n'
            '        x = self.ffn_norm(x)\n'
            '        x = self.ffn(x) + x\n'
            '        return x, present\n'
        ), "https://github.com/Project-MONAI/MONAI/pull/9011 (review: 'Residual stream gets overwritten by the normed value before the MLP add'); https://github.com/naklecha/llama3-from-scratch/issues/28", 'second residual starts from ffn_norm'),
    },
    'DecoderLM': {
        'meta_last_position_logits_only': (_LM_HEAD + (
            '        self.lm_head.weight = self.embedding.weight\n'
            '        nn.init.normal_(self.embedding.weight, std=0.02)\n'
            '\n'
            '    def forward(self, tokens, past_kvs=None):\n'
            '        h = self.embedding(tokens)\n'
            '        presents = []\n'
            '        for i, layer in enumerate(self.layers):\n'
            '            h, present = layer(h, None if past_kvs is None else past_kvs[i])\n'
            '            presents.append(present)\n'
            '        h = self.norm(h)\n'
            '        output = self.lm_head(h[:, -1, :])  # only compute last logits\n'
            '        return output, presents\n'
        ), "https://github.com/meta-llama/llama/issues/294 (also nanoGPT's inference path, https://github.com/karpathy/nanoGPT/issues/42)", 'has shape (2, 20)'),
        'trtllm_first_cache_for_every_layer': (_LM_HEAD + (
            '        self.lm_head.weight = self.embedding.weight\n'
            '        nn.init.normal_(self.embedding.weight, std=0.02)\n'
            '\n'
            '    def forward(self, tokens, past_kvs=None):\n'
            '        h = self.embedding(tokens)\n'
            '        presents = []\n'
            '        for layer in self.layers:\n'
            '            h, present = layer(h, None if past_kvs is None else past_kvs[0])\n'
            '            presents.append(present)\n'
            '        return self.lm_head(self.norm(h)), presents\n'
        ), 'https://github.com/NVIDIA/TensorRT-LLM/pull/2682', 'past_kvs[0]'),
    },
    'top_p_filter': {
        'chatrwkv_argmax_cutoff': (_TOPP + _TOPP_CHECK + (
            '    probs = F.softmax(logits.float(), dim=-1)\n'
            '    sorted_probs = torch.sort(probs, dim=-1, descending=True).values\n'
            '    cumulative_probs = torch.cumsum(sorted_probs, dim=-1)\n'
            '    first = torch.argmax((cumulative_probs > top_p).int(), dim=-1, keepdim=True)  # np.argmax: 0 if none\n'
            '    cutoff = sorted_probs.gather(-1, first)\n'
            "    return logits.masked_fill(probs < cutoff, float('-inf'))\n"
        ), 'https://github.com/BlinkDL/ChatRWKV/pull/170', 'top_p = 1 keeps every token'),
        'mlx_tiny_top_p_masks_all': (_TOPP + _TOPP_CHECK + (
            '    sorted_logits, sorted_indices = torch.sort(logits.flip(-1), dim=-1, stable=True)\n'
            '    sorted_indices = logits.size(-1) - 1 - sorted_indices\n'
            '    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)\n'
            '    keep_sorted = cumulative_probs > 1 - top_p\n'
            '    keep = torch.zeros_like(keep_sorted).scatter(-1, sorted_indices, keep_sorted)\n'
            "    return logits.masked_fill(~keep, float('-inf'))\n"
        ), 'https://github.com/ml-explore/mlx-lm/pull/1912', 'most likely token is always in the nucleus'),
        'fishspeech_1d_indexing_on_batch': (_TOPP + _TOPP_CHECK + (
            '    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)\n'
            '    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n'
            '    sorted_indices_to_remove = cum_probs >= top_p\n'
            '    sorted_indices_to_remove[1:] = sorted_indices_to_remove[:-1].clone()\n'
            '    sorted_indices_to_remove[0] = False  # keep at least one option\n'
            '    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)\n'
            "    return logits.masked_fill(indices_to_remove, float('-inf'))\n"
        ), 'https://github.com/fishaudio/fish-speech/pull/1326', 'shift by one is along the rows'),
        'hf1333_sorted_indices_index_rows': (_TOPP + _TOPP_CHECK + (
            '    if top_p >= 1.0:\n'
            '        return logits\n'
            '    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)\n'
            '    cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n'
            '    sorted_indices_to_remove = cumulative_probs >= top_p\n'
            '    sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()\n'
            '    sorted_indices_to_remove[..., 0] = False\n'
            '    indices_to_remove = sorted_indices[sorted_indices_to_remove]\n'
            "    logits[indices_to_remove] = float('-inf')\n"
            '    return logits\n'
        ), 'https://github.com/huggingface/transformers/pull/1333; https://github.com/neuralmagic/deepsparse/pull/1291', 'IndexError'),
        'attnrs_f32_cumsum_top_p_one': (_TOPP + _TOPP_CHECK + (
            '    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)\n'
            '    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n'
            '    sorted_indices_to_remove = F.pad(cum_probs >= top_p, (1, -1), value=False)\n'
            "    sorted_logits = sorted_logits.masked_fill(sorted_indices_to_remove, float('-inf'))\n"
            '    return sorted_logits.scatter(-1, sorted_indices, sorted_logits)\n'
        ), 'https://github.com/guoqingbao/attention.rs/pull/9 (cumsum rounding in top-p); form of https://github.com/lucidrains/x-transformers (autoregressive_wrapper.py, top_p)', 'top_p = 1 keeps every token'),
        'deepsparse_inplace_mutation': (_TOPP + _TOPP_CHECK + (
            '    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)\n'
            '    cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)\n'
            '    sorted_indices_to_remove = cumulative_probs >= top_p\n'
            '    sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()\n'
            '    sorted_indices_to_remove[..., 0] = 0\n'
            '    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)\n'
            "    logits[indices_to_remove] = float('-inf')\n"
            '    return logits\n'
        ), 'https://github.com/neuralmagic/deepsparse/pull/1414; https://github.com/guidance-ai/guidance/pull/1327 (code of https://github.com/lucidrains/DALLE-pytorch/issues/318)', 'top_p = 1 keeps every token'),
    },
    'sample_next_token': {
        'nanogpt_divide_by_zero_temperature': (_SAMPLE + _T_CHECK + (
            '    logits = logits / temperature\n'
            '    probs = F.softmax(top_p_filter(logits, top_p), dim=-1)\n'
            '    return torch.multinomial(probs, num_samples=1).squeeze(-1)\n'
        ), 'https://github.com/karpathy/nanoGPT/pull/739 (fixes #738); https://github.com/turboderp/exllama/issues/226', 'temperature 0 means greedy'),
        'mlxvlm_one_row_sort_order': (_SAMPLE + _T_CHECK + (
            '    if not 0 < top_p <= 1:\n'
            "        raise ValueError(f'top_p must be in (0, 1], got {top_p}')\n"
            '    if temperature == 0:\n'
            '        return logits.argmax(dim=-1)\n'
            '    probs = torch.softmax(logits * (1 / temperature), dim=-1)\n'
            '    sorted_indices = torch.argsort(probs, dim=-1, stable=True)[0]  # mlx: sorted_indices.squeeze(0)\n'
            '    sorted_probs = probs[..., sorted_indices]\n'
            '    cumulative_probs = torch.cumsum(sorted_probs, dim=-1)\n'
            '    top_probs = torch.where(cumulative_probs > 1 - top_p, sorted_probs, torch.zeros_like(sorted_probs))\n'
            '    sorted_token = torch.multinomial(top_probs, num_samples=1).squeeze(-1)\n'
            '    return sorted_indices[sorted_token]\n'
        ), 'https://github.com/Blaizzy/mlx-vlm/pull/1094; code of https://github.com/ml-explore/mlx-examples (llms/mlx_lm/sample_utils.py, top_p_sampling)', 'outside its own nucleus'),
    },
    'generate': {
        'medevalkit_inverted_do_sample': (_GEN + (
            '    if temperature < 0:\n'
            "        raise ValueError(f'temperature must be >= 0, got {temperature}')\n"
            '    do_sample = False if temperature else True\n'
            '    logits, past = model(prompt)\n'
            '    out = prompt\n'
            '    for step in range(max_new_tokens):\n'
            '        nxt = sample_next_token(logits[:, -1], temperature if do_sample else 0.0, top_p)\n'
            '        out = torch.cat([out, nxt[:, None]], dim=1)\n'
            '        logits, past = model(nxt[:, None], past)\n'
            '    return out\n'
        ), 'https://github.com/alibaba-damo-academy/MedEvalKit/pull/2', 'always taken (greedy)'),
    },
}
# deepsparse's top-p changes the logits it is given in place; the grader does not judge that (a judged kernel
# works on its own copy of every input), and the code loses its points for filtering at top_p = 1.
for _exercise, _entries in _LATER.items():
    MISTAKES[_exercise].update(_entries)
# The gist and x-transformers filter at top_p = 1 too (no guard): their float32 running sum passes 1 before the
# last of 50,000 tokens and drops the rest, where the text keeps every token. Right below 1, so mistakes now.
for _name in ("gist_shift_right", "xtransformers_fpad_scatter"):
    _code, _source = CORRECT["top_p_filter"].pop(_name)
    MISTAKES["top_p_filter"][_name] = (_code, _source + "; filters at top_p = 1 as well", "top_p = 1 keeps every token")
