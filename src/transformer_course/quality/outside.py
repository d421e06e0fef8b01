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
        "annotated_rate_with_check": (
            "def noam_lr(step, d_model, warmup_steps):\n    factor = 1.0\n    if step < 1:\n"
            "        raise ValueError('step counts from 1')\n"
            "    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup_steps ** (-1.5)))",
            ANNOTATED + ", with the ValueError the exercise asks for"),
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
    "noam_lr": {
        # The annotated Transformer turns step 0 into step 1, which hides a scheduler's off-by-one.
        "annotated_step_zero_as_one": (
            "def noam_lr(step, d_model, warmup_steps):\n    factor = 1.0\n    if step == 0:\n        step = 1\n"
            "    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup_steps ** (-1.5)))",
            ANNOTATED, "ValueError"),
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

# ------------------------------------------------ notebook 07: byte-pair encoding, beam search
SENNRICH = "https://arxiv.org/abs/1508.07909 (Sennrich et al. 2016, Algorithm 1: get_stats, merge_vocab)"
SUBWORD_NMT = "https://github.com/rsennrich/subword-nmt (subword_nmt/apply_bpe.py, encode)"
MINBPE = "https://github.com/karpathy/minbpe (minbpe/base.py, get_stats and merge)"
_BEAM = "@torch.no_grad()\ndef beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.6):\n"
# Batched over hypotheses; only hypothesis 0 is expanded at the first step (ParlAI's fix).
_PARLAI = (
    _BEAM + "    lp = lambda n: ((5.0 + n) / 6.0) ** length_penalty\n    out = []\n"
    "    for row in src:\n        row = row[None]\n        mask = make_padding_mask(row, model.pad_id)\n"
    "        memory = model.encode(row, mask)\n        K = beam_size\n"
    "        dev = src.device  # ParlAI keeps its beams on the model's device\n"
    "        ys = torch.full((K, 1), bos_id, device=dev)\n        scores = torch.zeros(K, device=dev)\n"
    "        done = torch.zeros(K, dtype=torch.bool, device=dev)\n        lengths = torch.zeros(K, device=dev)\n"
    "        for t in range(1, max_len):\n            if done.all():\n                break\n"
    "            h = model.decode(ys, memory.expand(K, -1, -1), mask, make_decoder_mask(ys, model.pad_id))\n"
    "            logprobs = F.log_softmax(model.generator(h[:, -1]), -1)\n            V = logprobs.size(-1)\n"
    "            cand = scores[:, None] + logprobs\n"
    "            cand = torch.where(done[:, None], torch.full_like(cand, float('-inf')), cand)\n"
    "            cand[:, model.pad_id] = torch.where(done, scores, cand[:, model.pad_id])\n"
    "            n = torch.where(done[:, None], lengths[:, None], torch.full_like(cand, float(t)))\n"
    "            ranked = cand / lp(n)\n"
    "            if t == 1:\n                ranked = ranked[:1]  # in the first step, pick from one hypothesis only\n"
    "            idx = ranked.reshape(-1).topk(K).indices\n            beam, tok = idx // V, idx % V\n"
    "            scores, lengths = cand[beam, tok], n[beam, tok]\n"
    "            done = done[beam] | (tok == eos_id)\n            ys = torch.cat([ys[beam], tok[:, None]], 1)\n"
    "        best = int((scores / lp(lengths)).argmax())\n"
    "        out.append(ys[best, :1 + int(lengths[best])].tolist())\n"
    "    width = max(len(r) for r in out)\n"
    "    return torch.tensor([r + [model.pad_id] * (width - len(r)) for r in out], device=src.device)\n")

CORRECT.update({
    "learn_bpe": {
        "sennrich_regex_vocab": (
            "import collections\nimport re\n\ndef learn_bpe(word_counts, num_merges):\n"
            "    vocab = {' '.join(word) + ' </w>': freq for word, freq in word_counts.items()}\n    merges = []\n"
            "    for i in range(num_merges):\n        pairs = collections.defaultdict(int)\n"
            "        for word, freq in vocab.items():\n            symbols = word.split()\n"
            "            for j in range(len(symbols) - 1):\n                pairs[symbols[j], symbols[j + 1]] += freq\n"
            "        if not pairs:\n            break\n        best = max(pairs, key=pairs.get)\n"
            "        bigram = re.escape(' '.join(best))\n        p = re.compile(r'(?<!\\S)' + bigram + r'(?!\\S)')\n"
            "        vocab = {p.sub(''.join(best), word): freq for word, freq in vocab.items()}\n"
            "        merges.append(best)\n    return merges", SENNRICH),
        "minbpe_lists": (
            "def _stats(ids, counts, weight):\n    for pair in zip(ids, ids[1:]):\n"
            "        counts[pair] = counts.get(pair, 0) + weight\n    return counts\n\n"
            "def _merge(ids, pair, new):\n    out, i = [], 0\n    while i < len(ids):\n"
            "        if ids[i] == pair[0] and i < len(ids) - 1 and ids[i + 1] == pair[1]:\n"
            "            out.append(new)\n            i += 2\n        else:\n            out.append(ids[i])\n            i += 1\n"
            "    return out\n\ndef learn_bpe(word_counts, num_merges):\n"
            "    words = {w: list(w) + ['</w>'] for w in word_counts}\n    merges = []\n"
            "    for _ in range(num_merges):\n        counts = {}\n"
            "        for w, ids in words.items():\n            _stats(ids, counts, word_counts[w])\n"
            "        if not counts:\n            break\n        pair = max(counts, key=counts.get)\n"
            "        merges.append(pair)\n        words = {w: _merge(ids, pair, pair[0] + pair[1]) for w, ids in words.items()}\n"
            "    return merges", MINBPE),
        # A reviewer flagged `new_vocab[tuple(new_tokens)] = freq` as losing counts when two words
        # collapse into one; distinct words never do (a merge keeps the joined text), so it is right.
        "overwrite_flagged_in_review": (
            "def learn_bpe(word_counts, num_merges):\n"
            "    vocab = {tuple(w) + ('</w>',): f for w, f in word_counts.items()}\n    merges = []\n"
            "    for _ in range(num_merges):\n        pairs = {}\n        for tokens, freq in vocab.items():\n"
            "            for i in range(len(tokens) - 1):\n"
            "                pairs[tokens[i], tokens[i + 1]] = pairs.get((tokens[i], tokens[i + 1]), 0) + freq\n"
            "        if not pairs:\n            break\n        best = max(pairs, key=pairs.get)\n        merges.append(best)\n"
            "        new_vocab = {}\n        for tokens, freq in vocab.items():\n            new_tokens, i = [], 0\n"
            "            while i < len(tokens):\n"
            "                if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == best:\n"
            "                    new_tokens.append(tokens[i] + tokens[i + 1])\n                    i += 2\n"
            "                else:\n                    new_tokens.append(tokens[i])\n                    i += 1\n"
            "            new_vocab[tuple(new_tokens)] = freq\n        vocab = new_vocab\n    return merges",
            "https://github.com/rohitg00/ai-engineering-from-scratch/pull/47 (review comment on main.py)"),
    },
    "apply_bpe": {
        "subword_nmt_lowest_rank_first": (
            "def apply_bpe(word, merges):\n    ranks = {pair: i for i, pair in enumerate(merges)}\n"
            "    word = list(word) + ['</w>']\n    while len(word) > 1:\n"
            "        pairs = set(zip(word, word[1:]))\n"
            "        bigram = min(pairs, key=lambda p: ranks.get(p, float('inf')))\n"
            "        if bigram not in ranks:\n            break\n        first, second = bigram\n"
            "        new_word, i = [], 0\n        while i < len(word):\n"
            "            try:\n                j = word.index(first, i)\n            except ValueError:\n"
            "                new_word.extend(word[i:])\n                break\n"
            "            new_word.extend(word[i:j])\n            i = j\n"
            "            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:\n"
            "                new_word.append(first + second)\n                i += 2\n"
            "            else:\n                new_word.append(word[i])\n                i += 1\n"
            "        word = new_word\n    return word", SUBWORD_NMT),
    },
    "beam_search": {
        "parlai_first_step_one_hypothesis": (
            _PARLAI, "https://github.com/facebookresearch/ParlAI/pull/2047 (beam search expands one hypothesis first)"),
    },
})

MISTAKES.update({
    "beam_search": {
        "parlai_all_beams_expanded": (
            _PARLAI.replace("            if t == 1:\n                ranked = ranked[:1]  # in the first step, pick from one hypothesis only\n", ""),
            "https://github.com/facebookresearch/ParlAI/issues/2007 (every beam starts from <bos>: same sentence K times)",
            "copies of <bos>"),
        "jadore_stop_when_top_finished": (
            _PARLAI.replace("            if done.all():\n                break\n",
                            "            if t > 1 and bool(done[int((scores / lp(lengths)).argmax())]):\n                break\n"),
            "https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/21 (done when top-of-beam is EOS)",
            "best hypothesis"),
    },
    "apply_bpe": {
        "hf_course_merges_by_position": (
            "def apply_bpe(word, merges):\n    symbols = list(word) + ['</w>']\n    known = set(merges)\n"
            "    changed = True\n    while changed:\n        changed = False\n"
            "        for i in range(len(symbols) - 1):\n            if (symbols[i], symbols[i + 1]) in known:\n"
            "                symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]\n                changed = True\n"
            "                break\n    return symbols",
            "https://github.com/huggingface/course/issues/608 ('thug': merges applied by position, not in the order learned)",
            "in the order learned"),
    },
})

# Notebook 08 (a modern decoder): its own module, for its length.
from transformer_course.quality import outside08  # noqa: E402

CORRECT.update(outside08.CORRECT)
MISTAKES.update(outside08.MISTAKES)
