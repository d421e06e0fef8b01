"""Catalogue from outside: answers adapted from public Transformer implementations, and bugs
reported in their issue threads, each with where it comes from.

The grader was not tuned on these (unlike :mod:`.catalogue`, written next to the checks): they
measure whether it is fair on code written elsewhere. Each entry is rewritten to the course's
names and signatures, keeping the approach of its source (how it builds the table, where it
masks, how it reduces), not its text. ``tests/test_fairness.py`` grades them through the real
path; ``make bench`` reports their figures apart from the own catalogue's.

A mistake's ``words`` are what its feedback must contain: the name of the mistake, or where
it is (e.g. "only indices 1, 3" for the cos columns).
"""

from __future__ import annotations

ANNOTATED = "https://github.com/harvardnlp/annotated-transformer (the_annotated_transformer.py)"
NANOGPT = "https://github.com/karpathy/nanoGPT (model.py, CausalSelfAttention)"
D2L = "https://d2l.ai (chapters 3.6 softmax from scratch, 11.5 multi-head attention, 11.6 positional encoding)"
BENTREVETT = "https://github.com/bentrevett/pytorch-seq2seq (6 - Attention is All You Need)"
HYUNWOONGKO = "https://github.com/hyunwoongko/transformer (models/layers/scale_dot_product_attention.py)"
JADORE = "https://github.com/jadore801120/attention-is-all-you-need-pytorch (transformer/Models.py)"
TORCH_TUTORIAL = "https://pytorch.org/tutorials/beginner/translation_transformer.html"
FAIRSEQ = "https://github.com/facebookresearch/fairseq (criterions/label_smoothed_cross_entropy.py)"

_SDPA = "def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n"
_PE = "def sinusoidal_positional_encoding(max_len, d_model):\n"
_LS = ("class LabelSmoothingLoss(nn.Module):\n    def __init__(self, smoothing=0.1, ignore_index=-100):\n"
       "        super().__init__()\n        self.smoothing, self.ignore_index = smoothing, ignore_index\n\n"
       "    def forward(self, logits, target):\n")

# exercise -> {name: (code, source)}
CORRECT: dict[str, dict[str, tuple[str, str]]] = {
    "attention_scores": {
        "bentrevett_permute": (
            "def attention_scores(query, key):\n"
            "    dims = list(range(key.dim()))\n"
            "    dims[-1], dims[-2] = dims[-2], dims[-1]\n"
            "    return torch.matmul(query, key.permute(*dims))", BENTREVETT),
    },
    "scaled_dot_product_attention": {
        "nanogpt_inf_fill": (
            _SDPA + "    att = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(key.size(-1)))\n"
            "    if mask is not None:\n        att = att.masked_fill(mask == 0, float('-inf'))\n"
            "    att = F.softmax(att, dim=-1)\n"
            "    att = att.masked_fill(torch.isnan(att), 0.0)  # rows with no key left\n"
            "    att = F.dropout(att, p=dropout_p, training=dropout_p > 0)\n"
            "    return att @ value, att", NANOGPT),
        "bentrevett_scale_tensor": (
            _SDPA + "    scale = torch.sqrt(torch.tensor([query.shape[-1]], dtype=query.dtype))\n"
            "    energy = torch.matmul(query, key.transpose(-2, -1)) / scale\n"
            "    if mask is not None:\n        energy = energy.masked_fill(~mask, float('-inf'))\n"
            "    attention = torch.softmax(energy, dim=-1).nan_to_num(0.0)\n"
            "    attention = torch.nn.functional.dropout(attention, dropout_p) if dropout_p else attention\n"
            "    return torch.matmul(attention, value), attention", BENTREVETT),
    },
    "split_heads": {
        "annotated_view_transpose": (
            "def split_heads(x, num_heads):\n    nbatches, length, d_model = x.shape\n"
            "    return x.view(nbatches, -1, num_heads, d_model // num_heads).transpose(1, 2)", ANNOTATED),
        "d2l_reshape_permute": (
            "def split_heads(x, num_heads):\n    x = x.reshape(x.shape[0], x.shape[1], num_heads, -1)\n"
            "    return x.permute(0, 2, 1, 3)", D2L),
    },
    "combine_heads": {
        "nanogpt_contiguous_view": (
            "def combine_heads(x):\n    B, nh, T, hs = x.size()\n"
            "    return x.transpose(1, 2).contiguous().view(B, T, nh * hs)", NANOGPT),
        "d2l_permute_reshape": (
            "def combine_heads(x):\n    x = x.permute(0, 2, 1, 3)\n"
            "    return x.reshape(x.shape[0], x.shape[1], -1)", D2L),
    },
    "sinusoidal_positional_encoding": {
        "annotated_exp_log": (
            _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    pe = torch.zeros(max_len, d_model)\n    position = torch.arange(0, max_len).unsqueeze(1)\n"
            "    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))\n"
            "    pe[:, 0::2] = torch.sin(position * div_term)\n    pe[:, 1::2] = torch.cos(position * div_term)\n"
            "    return pe", ANNOTATED),
        "d2l_pow": (
            _PE + "    if d_model % 2 != 0:\n        raise ValueError(f'odd d_model {d_model}')\n"
            "    P = torch.zeros((max_len, d_model))\n"
            "    X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(\n"
            "        10000, torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)\n"
            "    P[:, 0::2] = torch.sin(X)\n    P[:, 1::2] = torch.cos(X)\n    return P", D2L),
        "jadore_numpy_table": (
            "import numpy as np\n\n" + _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    def angles(pos):\n"
            "        return [pos / np.power(10000, 2 * (j // 2) / d_model) for j in range(d_model)]\n"
            "    table = np.array([angles(p) for p in range(max_len)])\n"
            "    table[:, 0::2] = np.sin(table[:, 0::2])\n    table[:, 1::2] = np.cos(table[:, 1::2])\n"
            "    return torch.FloatTensor(table)", JADORE),
        "torch_tutorial_den": (
            _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    den = torch.exp(-torch.arange(0, d_model, 2) * math.log(10000) / d_model)\n"
            "    pos = torch.arange(0, max_len).reshape(max_len, 1)\n"
            "    table = torch.zeros((max_len, d_model))\n"
            "    table[:, 0::2] = torch.sin(pos * den)\n    table[:, 1::2] = torch.cos(pos * den)\n"
            "    return table", TORCH_TUTORIAL),
    },
    "layer_norm": {
        "hkproj_pr31_sqrt_var_eps": (
            "def layer_norm(x, weight, bias, eps=1e-5):\n    mean = x.mean(dim=-1, keepdim=True)\n"
            "    var = x.var(dim=-1, keepdim=True, unbiased=False)\n"
            "    return weight * (x - mean) / torch.sqrt(var + eps) + bias",
            "https://github.com/hkproj/pytorch-transformer/pull/31 (the fix)"),
    },
    "noam_lr": {
        "annotated_rate": (
            "def noam_lr(step, d_model, warmup_steps):\n    factor = 1.0\n    if step == 0:\n        step = 1\n"
            "    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup_steps ** (-1.5)))",
            ANNOTATED),
    },
    "LabelSmoothingLoss": {
        "fairseq_style_uniform_over_all": (
            _LS + "        lprobs = F.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))\n"
            "        target = target.reshape(-1)\n        keep = target != self.ignore_index\n"
            "        lprobs, target = lprobs[keep], target[keep]\n"
            "        nll = -lprobs.gather(1, target[:, None]).squeeze(1)\n        smooth = -lprobs.mean(-1)\n"
            "        return ((1 - self.smoothing) * nll + self.smoothing * smooth).mean()", FAIRSEQ),
    },
}

# exercise -> {name: (code, source: the issue or pull request that reports it, words)}
MISTAKES: dict[str, dict[str, tuple[str, str, str]]] = {
    "softmax": {
        "d2l_no_shift_fixed_axis": (
            "def softmax(X, dim=-1):\n    X_exp = torch.exp(X)\n    partition = X_exp.sum(1, keepdim=True)\n"
            "    return X_exp / partition", D2L + " (sums over axis 1 of a matrix, no max shift)", "raised IndexError"),
    },
    "attention_scores": {
        "hyunwoongko_fixed_axes": (
            "def attention_scores(query, key):\n    k_t = key.transpose(2, 3)\n    return query @ k_t",
            HYUNWOONGKO, "raised IndexError"),
    },
    "scaled_dot_product_attention": {
        "annotated_minus_1e9": (
            _SDPA + "    d_k = query.size(-1)\n"
            "    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)\n"
            "    if mask is not None:\n        scores = scores.masked_fill(mask == 0, -1e9)\n"
            "    p_attn = scores.softmax(dim=-1)\n    p_attn = F.dropout(p_attn, dropout_p)\n"
            "    return torch.matmul(p_attn, value), p_attn", ANNOTATED + " (a finite fill: uniform fully masked rows)",
            "-1e9"),
        "hyunwoongko_minus_10000": (
            _SDPA + "    batch_size, length, d_tensor = key.size(0), key.size(-2), key.size(-1)\n"
            "    score = (query @ key.transpose(-2, -1)) / math.sqrt(d_tensor)\n"
            "    if mask is not None:\n        score = score.masked_fill(mask == 0, -10000)\n"
            "    score = torch.softmax(score, dim=-1)\n    v = score @ value\n    return v, score",
            "https://github.com/hyunwoongko/transformer/issues/10", "-1e9"),
    },
    "combine_heads": {
        "view_without_transpose": (
            "def combine_heads(x):\n    B, h, L, d = x.shape\n    return x.reshape(B, L, h * d)",
            "https://github.com/jsbaan/transformer-from-scratch/pull/6", "transpose"),
    },
    "split_heads": {
        "view_heads_first": (
            "def split_heads(x, num_heads):\n    B, L, D = x.shape\n    return x.view(B, num_heads, L, D // num_heads)",
            "https://github.com/hyunwoongko/transformer/issues/15", "transpose"),
    },
    "sinusoidal_positional_encoding": {
        "samlynnevans_exponents": (
            _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    pe = torch.zeros(max_len, d_model)\n    for pos in range(max_len):\n"
            "        for i in range(0, d_model, 2):\n"
            "            pe[pos, i] = math.sin(pos / (10000 ** ((2 * i) / d_model)))\n"
            "            pe[pos, i + 1] = math.cos(pos / (10000 ** ((2 * (i + 1)) / d_model)))\n    return pe",
            "https://github.com/SamLynnEvans/Transformer/issues/7", "2c/D"),
        "maxjcohen_cos_from_one_base_1000": (
            _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    PE = torch.zeros((max_len, d_model))\n    pos = torch.arange(max_len).unsqueeze(1)\n"
            "    even = torch.arange(0, d_model, 2, dtype=torch.float32)\n"
            "    odd = torch.arange(1, d_model, 2, dtype=torch.float32)\n"
            "    PE[:, 0::2] = torch.sin(pos / torch.pow(1000, even / d_model))\n"
            "    PE[:, 1::2] = torch.cos(pos / torch.pow(1000, odd / d_model))\n"
            "    return PE", "https://github.com/maxjcohen/transformer/issues/62", "base"),
        "cos_exponent_shifted": (
            _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    pos = torch.arange(max_len, dtype=torch.float32)[:, None]\n"
            "    even = torch.arange(0, d_model, 2, dtype=torch.float32)\n    pe = torch.zeros(max_len, d_model)\n"
            "    pe[:, 0::2] = torch.sin(pos / 10000 ** (even / d_model))\n"
            "    pe[:, 1::2] = torch.cos(pos / 10000 ** ((even + 1) / d_model))\n    return pe",
            "https://github.com/maxjcohen/transformer/issues/62 (the cos exponent alone)",
            "the sin columns (0, 2, ...) are right"),
        "loftr_precedence": (
            _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    pe = torch.zeros(max_len, d_model)\n    position = torch.arange(max_len).float().unsqueeze(1)\n"
            "    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model // 2))\n"
            "    pe[:, 0::2] = torch.sin(position * div_term)\n    pe[:, 1::2] = torch.cos(position * div_term)\n"
            "    return pe", "https://github.com/zju3dv/LoFTR/issues/41", "exp(-2i)"),
        "divides_by_div_term": (
            _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    pe = torch.zeros(max_len, d_model)\n    position = torch.arange(0, max_len).unsqueeze(1)\n"
            "    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))\n"
            "    pe[:, 0::2] = torch.sin(position / div_term)\n    pe[:, 1::2] = torch.cos(position / div_term)\n"
            "    return pe", "https://github.com/harvardnlp/annotated-transformer/issues/131",
            "instead of dividing"),
        "unpaired_exponent": (
            _PE + "    if d_model % 2:\n        raise ValueError('d_model must be even')\n"
            "    i = torch.arange(d_model, dtype=torch.float64)\n"
            "    angle = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000 ** (2 * i / d_model)\n"
            "    angle[:, 0::2], angle[:, 1::2] = angle[:, 0::2].sin(), angle[:, 1::2].cos()\n"
            "    return angle.float()", "https://github.com/shenweichen/DeepCTR/issues/379", "2c/D"),
    },
    "layer_norm": {
        "annotated_unbiased_std_plus_eps": (
            "def layer_norm(x, weight, bias, eps=1e-6):\n    mean = x.mean(-1, keepdim=True)\n"
            "    std = x.std(-1, keepdim=True)\n    return weight * (x - mean) / (std + eps) + bias",
            "https://github.com/harvardnlp/annotated-transformer/issues/122", "(std + eps) with the unbiased std"),
        "hkproj_std_plus_eps": (
            "def layer_norm(x, weight, bias, eps=1e-5):\n    mean = x.mean(dim=-1, keepdim=True)\n"
            "    std = x.std(dim=-1, keepdim=True)\n    return weight * (x - mean) / (std + eps) + bias",
            "https://github.com/hkproj/pytorch-transformer/pull/31", "(std + eps) with the unbiased std"),
        "allennlp_biased_std_plus_eps": (
            "def layer_norm(x, weight, bias, eps=1e-5):\n    mean = x.mean(-1, keepdim=True)\n"
            "    std = x.std(-1, unbiased=False, keepdim=True)\n    return weight * (x - mean) / (std + eps) + bias",
            "https://github.com/allenai/allennlp/pull/953", "eps to the standard deviation"),
        "nanogpt_builtin": (
            "def layer_norm(x, weight, bias, eps=1e-5):\n    return F.layer_norm(x, weight.shape, weight, bias, 1e-5)",
            NANOGPT + " (class LayerNorm wraps F.layer_norm)", "built-in"),
    },
    "LabelSmoothingLoss": {
        "fairseq_v_minus_1": (
            _LS + "        lprobs = F.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))\n"
            "        target = target.reshape(-1)\n        keep = target != self.ignore_index\n"
            "        lprobs, target = lprobs[keep], target[keep]\n"
            "        eps_i = self.smoothing / (lprobs.size(-1) - 1)\n"
            "        nll = -lprobs.gather(1, target[:, None]).squeeze(1)\n        smooth = -lprobs.sum(-1)\n"
            "        return ((1.0 - self.smoothing - eps_i) * nll + eps_i * smooth).mean()",
            FAIRSEQ + " (spreads the mass over the V - 1 wrong classes)", "V-1"),
        "kl_sum_not_mean": (
            _LS + "        V = logits.size(-1)\n        logp = F.log_softmax(logits, -1).reshape(-1, V)\n"
            "        target = target.reshape(-1)\n"
            "        true_dist = torch.full_like(logp, self.smoothing / V)\n"
            "        true_dist.scatter_(1, target.clamp(min=0)[:, None], 1 - self.smoothing + self.smoothing / V)\n"
            "        true_dist[target == self.ignore_index] = 0\n"
            "        return -(true_dist * logp).sum()",
            "https://github.com/huggingface/transformers/issues/7546 (not normalised by the tokens)", "sum"),
    },
}
