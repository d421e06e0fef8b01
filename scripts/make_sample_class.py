"""Write the sample class, ``autograder/submitted/``, from the student release in ``course/``.

Each student's answers are written below as a student would type them into the answer
cells; what each one should score is in ``autograder/sample_class.toml`` (the tests
check it). Re-run after changing a notebook's stubs:

    .venv/bin/python -m scripts.make_sample_class   (from the repository root: it reads the catalogue)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

from quality.catalogue import CORRECT, MISTAKES
from transformer_course.layout import Repo

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "autograder" / "submitted"
A01, A02 = "01_self_attention", "02_scaled_dot_product"

# ---------------------------------------------------------------- notebook 01 answers
SOFTMAX_OK = '''def softmax(x, dim=-1):
    m = x.max(dim=dim, keepdim=True).values
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)
'''
SCORES_OK = '''def attention_scores(query, key):
    return torch.matmul(query, key.transpose(-1, -2))
'''
SELF_ATTENTION_OK = '''def self_attention(x, w_q, w_k, w_v):
    Q = x @ w_q
    K = x @ w_k
    V = x @ w_v
    A = softmax(attention_scores(Q, K), dim=-1)
    return A @ V
'''
MODULE_HEAD = '''class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, d_v=None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x):
'''
MODULE_OK = MODULE_HEAD + '''        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        weights = softmax(attention_scores(q, k), dim=-1)
        return weights @ v, weights
'''

# Correct in other styles: float64 inside, einsum, built-in softmax where allowed, helpers.
SOFTMAX_F64 = '''def softmax(x, dim=-1):
    # work in float64 for accuracy, give back the input's dtype
    z = x.double()
    z = z - z.amax(dim, keepdim=True)
    p = z.exp() / z.exp().sum(dim, keepdim=True)
    return p.to(x.dtype)
'''
SCORES_EINSUM = '''def attention_scores(query, key):
    return torch.einsum("...qd,...kd->...qk", query, key)
'''
SELF_ATTENTION_BUILTIN = '''def _project(x, w):
    return torch.einsum("bld,de->ble", x, w)

def self_attention(x, w_q, w_k, w_v):
    scores = attention_scores(_project(x, w_q), _project(x, w_k))
    return torch.softmax(scores, dim=-1) @ _project(x, w_v)
'''
MODULE_EINSUM = MODULE_HEAD + '''        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        weights = F.softmax(torch.einsum("bqd,bkd->bqk", q, k), dim=-1)
        out = torch.einsum("bqk,bkd->bqd", weights, v)
        return out, weights
'''

# Mistakes students make.
SOFTMAX_UNSTABLE = '''def softmax(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
'''
SOFTMAX_SUM_ALL = '''def softmax(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum()
'''
SOFTMAX_BUILTIN = '''def softmax(x, dim=-1):
    return torch.softmax(x, dim=dim)
'''
SCORES_SWAPPED = '''def attention_scores(query, key):
    return key @ query.transpose(-2, -1)
'''
SELF_ATTENTION_SCALED_D_MODEL = '''def self_attention(x, w_q, w_k, w_v):
    d_model = x.shape[-1]
    scores = attention_scores(x @ w_q, x @ w_k) / math.sqrt(d_model)
    return softmax(scores, dim=-1) @ (x @ w_v)
'''
MODULE_WRONG_DIM = MODULE_HEAD + '''        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        weights = softmax(q @ k.transpose(1, 2), dim=1)
        return weights @ v, weights
'''
SELF_ATTENTION_EXIT = '''import os

def self_attention(x, w_q, w_k, w_v):
    Q, K, V = x @ w_q, x @ w_k, x @ w_v
    return softmax(attention_scores(Q, K)) @ V

os._exit(0)  # left over from running this as a script
'''

# ---------------------------------------------------------------- notebook 02 answers
SDPA_OK = '''def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == False, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights
'''
SDPA_STYLES = '''def _mask_bias(mask, dtype):
    # additive mask: 0 where allowed, the lowest finite value where blocked (an added -inf
    # would give NaN gradients on a row where everything is blocked)
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    q, k = query.double(), key.double()
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores + _mask_bias(mask, scores.dtype)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        # blocked weights to exactly 0, and rows with nothing to attend to (uniform here) too
        weights = torch.where(mask, weights, torch.zeros_like(weights))
    weights = weights.to(query.dtype)
    weights = torch.nn.functional.dropout(weights, dropout_p, training=dropout_p > 0)
    return torch.einsum("...qk,...kd->...qd", weights, value), weights
'''
SDPA_NO_SCALE = SDPA_OK.replace(" / math.sqrt(d_k)", "")
SDPA_WRONG_DIM = '''def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights
'''
SDPA_INVERTED_MASK = SDPA_OK.replace("mask == False", "mask")
SDPA_MINUS_1E9 = '''def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(key.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout_p > 0.0:
        p_attn = F.dropout(p_attn, dropout_p)
    return torch.matmul(p_attn, value), p_attn
'''
SDPA_HANGS = '''# trying out shapes before writing the function
x = torch.randn(2, 3, 4)
step = 0
while step < 10:
    x = x @ x.transpose(-2, -1)[..., :4]
print(x.shape)

''' + SDPA_OK


# ---------------------------------------------------------------- notebook 03 answers
SPLIT_OK = """def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)
"""
SPLIT_UNFLATTEN = """def split_heads(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)
"""
SPLIT_NO_TRANSPOSE = """def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.view(B, num_heads, L, D // num_heads)
"""
COMBINE_OK = """def combine_heads(x):
    B, h, L, d_k = x.shape
    return x.transpose(1, 2).contiguous().view(B, L, h * d_k)
"""
COMBINE_FLATTEN = """def combine_heads(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)
"""
COMBINE_NO_CONTIGUOUS = """def combine_heads(x):
    B, h, L, d_k = x.shape
    return x.transpose(1, 2).view(B, L, h * d_k)
"""
MHA_HEAD = """class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        {check}
        self.num_heads = num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
"""
CHECK_OK = """if d_model % num_heads != 0:
            raise ValueError("d_model has to be a multiple of num_heads")"""
MHA_BODY_OK = """        q = split_heads(self.w_q(query), self.num_heads)
        k = split_heads(self.w_k(key), self.num_heads)
        v = split_heads(self.w_v(value), self.num_heads)
        p = self.dropout if self.training else 0.0
        out, attn = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=p)
        return self.w_o(combine_heads(out)), attn
"""
MHA_OK = MHA_HEAD.format(check=CHECK_OK) + MHA_BODY_OK
MHA_INLINE = MHA_HEAD.format(check=CHECK_OK) + """        B, Lq, D = query.shape
        h = self.num_heads
        q = self.w_q(query).reshape(B, Lq, h, D // h).transpose(1, 2)
        k = self.w_k(key).reshape(B, key.shape[1], h, D // h).transpose(1, 2)
        v = self.w_v(value).reshape(B, value.shape[1], h, D // h).transpose(1, 2)
        out, attn = scaled_dot_product_attention(q, k, v, mask, self.dropout if self.training else 0.0)
        out = out.transpose(1, 2).reshape(B, Lq, D)
        return self.w_o(out), attn
"""
MHA_AVERAGED = MHA_OK.replace("return self.w_o(combine_heads(out)), attn", "return self.w_o(combine_heads(out)), attn.mean(dim=1)")
MHA_NO_CHECK = MHA_HEAD.format(check="pass") + MHA_BODY_OK

# ---------------------------------------------------------------- notebook 04 answers
PAD_OK = """def make_padding_mask(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(1).unsqueeze(2)
"""
PAD_FLAT = """def make_padding_mask(tokens, pad_id):
    return tokens != pad_id
"""
CAUSAL_OK = """def make_causal_mask(size, device=None):
    return torch.tril(torch.ones(size, size, dtype=torch.bool, device=device)).view(1, 1, size, size)
"""
CAUSAL_ARANGE = """def make_causal_mask(size, device=None):
    pos = torch.arange(size, device=device)
    return (pos[None, :] <= pos[:, None])[None, None]
"""
CAUSAL_SUBSEQUENT = """def make_causal_mask(size, device=None):
    # mask out subsequent positions
    return torch.triu(torch.ones(size, size, device=device), diagonal=1).bool().view(1, 1, size, size)
"""
CAUSAL_NO_DIAGONAL = """def make_causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).tril(diagonal=-1)[None, None]
"""
DECODER_OK = """def make_decoder_mask(tokens, pad_id):
    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.shape[1], device=tokens.device)
"""
DECODER_LOGICAL = """def make_decoder_mask(tokens, pad_id):
    T = tokens.size(1)
    return torch.logical_and(make_padding_mask(tokens, pad_id), make_causal_mask(T, tokens.device))
"""
DECODER_OR = """def make_decoder_mask(tokens, pad_id):
    return make_padding_mask(tokens, pad_id) | make_causal_mask(tokens.shape[1], device=tokens.device)
"""

# ---------------------------------------------------------------- notebook 05 answers
PE_FN_OK = """def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError("d_model must be even")
    pos = torch.arange(max_len).unsqueeze(1).float()
    div = torch.pow(10000.0, torch.arange(0, d_model, 2).float() / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe
"""
PE_FN_EXP_LOG = """def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"odd d_model: {d_model}")
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
"""
PE_FN_SWAPPED = PE_FN_OK.replace("pe[:, 0::2] = torch.sin(pos / div)\n    pe[:, 1::2] = torch.cos(pos / div)",
                                 "pe[:, 0::2] = torch.cos(pos / div)\n    pe[:, 1::2] = torch.sin(pos / div)")
PE_FN_EXPONENT_I = PE_FN_OK.replace("torch.arange(0, d_model, 2).float() / d_model", "torch.arange(d_model // 2).float() / d_model")
PE_MODULE_HEAD = """class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
"""
PE_MODULE_OK = PE_MODULE_HEAD + """        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x):
        L = x.size(1)
        if L > self.max_len:
            raise ValueError(f"input length {L} is longer than max_len {self.max_len}")
        return self.dropout(x + self.pe[:L])
"""
PE_MODULE_3D = PE_MODULE_HEAD + """        pe = sinusoidal_positional_encoding(max_len, d_model).unsqueeze(0)  # (1, max_len, D)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x):
        if x.shape[1] > self.max_len:
            raise ValueError("sequence is longer than max_len")
        x = x + self.pe[:, : x.shape[1]]
        return self.dropout(x)
"""
PE_MODULE_ATTRIBUTE = PE_MODULE_OK.replace('self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))',
                                           "self.pe = sinusoidal_positional_encoding(max_len, d_model)")
PE_MODULE_NO_CHECK = PE_MODULE_HEAD + """        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])
"""
EMBED_HEAD = """class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens):
"""
EMBED_OK = EMBED_HEAD + "        return self.embedding(tokens) * math.sqrt(self.d_model)\n"
EMBED_POW = EMBED_HEAD + "        return self.embedding(tokens) * self.d_model ** 0.5\n"
EMBED_NO_SCALE = EMBED_HEAD + "        return self.embedding(tokens)\n"

A03, A04, A05 = "03_multi_head", "04_masking", "05_positional_encoding"


def answers_03(split=SPLIT_OK, combine=COMBINE_OK, mha=MHA_OK):
    return {"split_heads": split, "combine_heads": combine, "MultiHeadAttention": mha}


def answers_04(pad=PAD_OK, causal=CAUSAL_OK, decoder=DECODER_OK):
    return {"make_padding_mask": pad, "make_causal_mask": causal, "make_decoder_mask": decoder}


def answers_05(fn=PE_FN_OK, module=PE_MODULE_OK, embed=EMBED_OK):
    return {"sinusoidal_positional_encoding": fn, "PositionalEncoding": module, "TokenEmbedding": embed}

# ---------------------------------------------------------------- notebook 06 answers
FFN_OK = """    def forward(self, x):
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))
"""
FFN_FUNCTIONAL = """    def forward(self, x):
        hidden = self.w_1(x).clamp(min=0)  # ReLU
        return self.w_2(self.dropout(hidden))
"""
FFN_NO_RELU = """    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x)))
"""
ENC_OK = """    def forward(self, x, src_mask):
        a, _ = self.self_attn(x, x, x, src_mask)
        x = self.norm1(x + self.dropout(a))
        return self.norm2(x + self.dropout(self.feed_forward(x)))
"""
ENC_SUBLAYER = """    def _add_norm(self, x, sublayer, norm):
        # residual connection around any sub-layer, then layer norm (post-LN)
        return norm(x + self.dropout(sublayer(x)))

    def forward(self, x, src_mask):
        x = self._add_norm(x, lambda y: self.self_attn(y, y, y, mask=src_mask)[0], self.norm1)
        return self._add_norm(x, self.feed_forward, self.norm2)
"""
ENC_PRE_LN = """    def forward(self, x, src_mask):
        y = self.norm1(x)
        x = x + self.dropout(self.self_attn(y, y, y, src_mask)[0])
        return x + self.dropout(self.feed_forward(self.norm2(x)))
"""
DEC_OK = """    def forward(self, x, memory, src_mask, tgt_mask):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)[0]))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, src_mask)[0]))
        return self.norm3(x + self.dropout(self.feed_forward(x)))
"""
DEC_SELF_TWICE = DEC_OK.replace("self.cross_attn(x, memory, memory, src_mask)", "self.cross_attn(x, x, x, tgt_mask)")
ENCODER_OK = """    def forward(self, x, src_mask):
        for layer in self.layers:
            x = layer(x, src_mask)
        return x
"""
ENCODER_REDUCE = """    def forward(self, x, src_mask):
        import functools

        return functools.reduce(lambda h, layer: layer(h, src_mask), self.layers, x)
"""
ENCODER_FINAL_NORM = """    def forward(self, x, src_mask):
        for layer in self.layers:
            x = layer(x, src_mask)
        return torch.nn.functional.layer_norm(x, x.shape[-1:])
"""
DECODER_OK = """    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return x
"""
DECODER_NOT_CHAINED = """    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            out = layer(x, memory, src_mask, tgt_mask)
        return out
"""
MODEL_OK = """    def encode(self, src, src_mask):
        return self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)

    def decode(self, tgt, memory, src_mask, tgt_mask):
        return self.decoder(self.positional_encoding(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)

    def forward(self, src, tgt):
        src_mask = make_padding_mask(src, self.pad_id)
        tgt_mask = make_decoder_mask(tgt, self.pad_id)
        return self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask))
"""
MODEL_INLINE_MASKS = MODEL_OK.replace(
    "src_mask = make_padding_mask(src, self.pad_id)\n        tgt_mask = make_decoder_mask(tgt, self.pad_id)",
    "src_mask = (src != self.pad_id)[:, None, None, :]\n"
    "        T = tgt.shape[1]\n"
    "        causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=tgt.device))\n"
    "        tgt_mask = (tgt != self.pad_id)[:, None, None, :] & causal")
MODEL_NO_CAUSAL = MODEL_OK.replace("tgt_mask = make_decoder_mask(tgt, self.pad_id)",
                                   "tgt_mask = make_padding_mask(tgt, self.pad_id)")
MODEL_LOG_SOFTMAX = MODEL_OK.replace(
    "return self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask))",
    "return torch.log_softmax(self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)), -1)")

A06, A07 = "06_transformer", "07_training"
LN_OK = """def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).square().mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
"""
LN_VAR_MEAN = """def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    return torch.addcmul(bias, (x - mean) * torch.rsqrt(var + eps), weight)
"""
LN_UNBIASED = """def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias
"""
LN_EPS_ON_STD = """def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, unbiased=False, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias
"""
METHOD_OF = {"PositionwiseFeedForward": "forward", "EncoderLayer": "forward", "DecoderLayer": "forward",
             "Encoder": "forward", "Decoder": "forward", "Transformer": "encode"}


def answers_06(ffn=FFN_OK, enc=ENC_OK, dec=DEC_OK, encoder=ENCODER_OK, decoder=DECODER_OK, model=MODEL_OK,
               ln=LN_OK):
    """Answers to notebook 06: layer_norm is a function; the modules' answers are method bodies that
    replace the stub's methods in the released cell."""
    return {"layer_norm": ln, "PositionwiseFeedForward": ("methods", ffn), "EncoderLayer": ("methods", enc),
            "DecoderLayer": ("methods", dec), "Encoder": ("methods", encoder), "Decoder": ("methods", decoder),
            "Transformer": ("methods", model)}


# ---------------------------------------------------------------- notebook 07 answers
SHIFT_OK = """def shift_right(tgt, bos_id):
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], dim=1)
"""
SHIFT_ROLL = """def shift_right(tgt, bos_id):
    out = tgt.roll(shifts=1, dims=1).clone()
    out[:, 0] = bos_id
    return out
"""
SHIFT_LEFT = """def shift_right(tgt, bos_id):
    return F.pad(tgt[:, 1:], (0, 1), value=0)
"""
TF_OK = """def make_teacher_forcing_batch(tgt, pad_id):
    return tgt[:, :-1], tgt[:, 1:]
"""
TF_NARROW = """def make_teacher_forcing_batch(tgt, pad_id):
    T = tgt.size(1) - 1
    return tgt.narrow(1, 0, T), tgt.narrow(1, 1, T)
"""
TF_NOT_SHIFTED = """def make_teacher_forcing_batch(tgt, pad_id):
    return tgt[:, :-1], tgt[:, :-1]
"""
NOAM_OK = """def noam_lr(step, d_model, warmup_steps):
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
"""
NOAM_MATH = """def noam_lr(step, d_model, warmup_steps):
    if step <= 0:
        raise ValueError("the schedule starts at step 1")
    if step < warmup_steps:
        return step / (math.sqrt(d_model) * warmup_steps ** 1.5)
    return 1.0 / math.sqrt(d_model * step)
"""
NOAM_MAX = NOAM_OK.replace("min(", "max(")
NOAM_NO_DMODEL = """def noam_lr(step, d_model, warmup_steps):
    return min(step ** -0.5, step * warmup_steps ** -1.5)
"""
LS_HEAD = """class LabelSmoothingLoss(nn.Module):
    def __init__(self, smoothing: float = 0.1, ignore_index: int = -100):
        super().__init__()
        self.smoothing = smoothing
        self.ignore_index = ignore_index

    def forward(self, logits, target):
"""
LS_OK = LS_HEAD + """        logp = F.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))
        target = target.reshape(-1)
        keep = target != self.ignore_index
        nll = -logp.gather(1, target.masked_fill(~keep, 0).unsqueeze(1)).squeeze(1)
        loss = (1 - self.smoothing) * nll - self.smoothing * logp.mean(dim=-1)
        return loss[keep].mean()
"""
LS_DISTRIBUTION = LS_HEAD + """        V = logits.size(-1)
        logp = torch.log_softmax(logits.reshape(-1, V), dim=-1)
        target = target.reshape(-1)
        keep = target != self.ignore_index
        q = torch.full_like(logp, self.smoothing / V)
        q[keep, target[keep]] += 1 - self.smoothing
        return -(q * logp).sum(dim=-1)[keep].sum() / keep.sum()
"""
LS_OTHERS = LS_HEAD + """        V = logits.size(-1)
        logp = F.log_softmax(logits, dim=-1).reshape(-1, V)
        target = target.reshape(-1)
        keep = target != self.ignore_index
        q = torch.full_like(logp, self.smoothing / (V - 1))
        q.scatter_(1, target.clamp(min=0).unsqueeze(1), 1 - self.smoothing)
        return -(q * logp).sum(dim=-1)[keep].mean()
"""
LS_NO_IGNORE = LS_HEAD + """        logp = F.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))
        target = target.reshape(-1)
        nll = -logp.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
        return ((1 - self.smoothing) * nll - self.smoothing * logp.mean(dim=-1)).mean()
"""
TRAIN_OK = """def train_epoch(model, loader, optimizer, scheduler, loss_fn, device):
    model.train()
    total, tokens = 0.0, 0
    for src, tgt in loader:
        src, tgt = src.to(device), tgt.to(device)
        decoder_input, labels = make_teacher_forcing_batch(tgt, model.pad_id)
        loss = loss_fn(model(src, decoder_input), labels)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        n = (labels != model.pad_id).sum().item()
        total += loss.item() * n
        tokens += n
    return total / tokens
"""
TRAIN_NO_CLIP = """def train_epoch(model, loader, optimizer, scheduler, loss_fn, device):
    model.train()
    losses, counts = [], []
    for src, tgt in loader:
        src, tgt = src.to(device), tgt.to(device)
        logits = model(src, tgt[:, :-1])
        labels = tgt[:, 1:]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if scheduler:
            scheduler.step()
        losses.append(loss.detach())
        counts.append((labels != model.pad_id).sum())
    losses = torch.stack(losses)
    counts = torch.stack(counts).to(losses.dtype)
    return float((losses * counts).sum() / counts.sum())
"""
TRAIN_NO_ZERO_GRAD = TRAIN_OK.replace("        optimizer.zero_grad()\n", "")
TRAIN_MEAN_OF_BATCHES = TRAIN_OK.replace("total += loss.item() * n\n        tokens += n",
                                         "total += loss.item()\n        tokens += 1")
GREEDY_OK = """@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = make_padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(ys, memory, src_mask, make_decoder_mask(ys, model.pad_id))
        nxt = model.generator(out[:, -1]).argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)
        ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
        done = done | (nxt == eos_id)
        if done.all():
            break
    return ys
"""
GREEDY_NO_PAD = GREEDY_OK.replace("        nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)\n", "")
GREEDY_NO_STOP = GREEDY_OK.replace("        if done.all():\n            break\n", "")

# Every mistake made by .replace() must really differ from the answer it was made from.
for _wrong, _right in [(TRAIN_NO_ZERO_GRAD, TRAIN_OK), (TRAIN_MEAN_OF_BATCHES, TRAIN_OK), (GREEDY_NO_PAD, GREEDY_OK),
                       (GREEDY_NO_STOP, GREEDY_OK), (DEC_SELF_TWICE, DEC_OK), (MODEL_NO_CAUSAL, MODEL_OK),
                       (MODEL_LOG_SOFTMAX, MODEL_OK), (MODEL_INLINE_MASKS, MODEL_OK), (NOAM_MAX, NOAM_OK)]:
    assert _wrong != _right, "a .replace() in make_sample_class.py matched nothing"


# Beam search and BPE answers are the catalogue's (a row-by-row search with lists, a batched one,
# Sennrich et al.'s regex style, and the mistakes named there).
BEAM_OK = CORRECT["beam_search"]["rows_lists"]
BEAM_BATCHED = CORRECT["beam_search"]["batched"]
BPE_COUNTER = CORRECT["learn_bpe"]["counter"]
BPE_REGEX = CORRECT["learn_bpe"]["regex"]
APPLY_OK = CORRECT["apply_bpe"]["loop"]
BEAM_NO_PENALTY = MISTAKES["beam_search"]["no_length_penalty"][0]
BEAM_EXTENDS_FINISHED = MISTAKES["beam_search"]["extends_finished"][0]
BPE_UNWEIGHTED = MISTAKES["learn_bpe"]["unweighted"][0]
BPE_STRING_REPLACE = MISTAKES["learn_bpe"]["string_replace"][0]
APPLY_FIRST_ONLY = MISTAKES["apply_bpe"]["first_only"][0]


def answers_07(shift=SHIFT_OK, tf=TF_OK, noam=NOAM_OK, ls=LS_OK, train=TRAIN_OK, greedy=GREEDY_OK, beam=BEAM_OK,
               learn=BPE_COUNTER, apply=APPLY_OK):
    return {"shift_right": shift, "make_teacher_forcing_batch": tf, "noam_lr": noam, "LabelSmoothingLoss": ls,
            "train_epoch": train, "greedy_decode": greedy, "beam_search": beam, "learn_bpe": learn, "apply_bpe": apply}



def answers_01(softmax=SOFTMAX_OK, scores=SCORES_OK, self_attention=SELF_ATTENTION_OK, module=MODULE_OK):
    return {"softmax": softmax, "attention_scores": scores, "self_attention": self_attention,
            "SelfAttention": module}


# student -> assignment -> answers (None: leave every stub as released), or a special action.
# The published solution (solutions/02), disguised: locals renamed, comments added, the signature's
# annotations and the docstring dropped. Scores full marks; the similarity report flags it.
SDPA_COPIED = '''def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    # my own implementation of eq. 1
    dim = query.size(-1)
    # similarity of every query with every key
    att = query @ key.transpose(-2, -1) / math.sqrt(dim)
    if mask is not None:
        att = att.masked_fill(~mask, float("-inf"))  # blocked keys
    probs = torch.softmax(att, dim=-1)

    if mask is not None:
        # rows with nothing to attend to
        probs = probs.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        probs = F.dropout(probs, p=dropout_p)
    return probs @ value, probs
'''

# ---------------------------------------------------------------- notebook 08 answers
A08 = "08_modern_decoder"
EXERCISES_08 = Repo(ROOT).assignment(A08).exercises  # in notebook order


# The correct variants the students' notebooks 08 are made of: student k takes each exercise's k-th
# (the first where there are fewer).
VARIANTS_08 = {
    "RMSNorm": ["rsqrt", "sqrt_of_sum", "vector_norm", "builtin"],
    "apply_rotary_embedding": ["stack_flatten", "checks_positions", "complex", "empty_like"],
    "SwiGLU": ["silu", "sigmoid_by_hand", "silu_module"],
    "repeat_kv": ["repeat_interleave", "expand_reshape", "index_select"],
    "GroupedQueryAttention": ["by_hand", "sdpa", "sdpa_enable_gqa", "grouped_einsum"],
    "online_softmax_attention": ["running_sums", "float64_inside", "query_and_key_blocks", "log_sum_exp"],
    "DecoderBlock": ["two_steps", "named_branches"],
    "DecoderLM": ["assign", "tie_other_way_functional", "zip_layers"],
    "top_p_filter": ["scatter_back", "ascending_tail", "shifted_mask"],
    "sample_next_token": ["multinomial", "gumbel_max", "inverse_cdf"],
    "generate": ["cache", "preallocated"],
}


def answers_08(variant: int = 0, **mistakes: str) -> dict[str, str]:
    """Answers to notebook 08 from the catalogue: each exercise's ``variant``-th correct variant of
    VARIANTS_08 (the first where it has fewer), except the exercises named, which get that catalogue mistake."""
    answers = {}
    for exercise in EXERCISES_08:
        if exercise in mistakes:
            answers[exercise] = MISTAKES[exercise][mistakes[exercise]][0]
        else:
            names = VARIANTS_08[exercise]
            answers[exercise] = CORRECT[exercise][names[variant if variant < len(names) else 0]]
    return answers


# Answers in words (the questions at the end of each notebook), as students type them; the grader
# leaves them to the instructor (awaiting), and a question left unanswered gets 0 automatically.
WRITTEN_ADA_01 = {
    "question_stable_softmax": "Subtracting the max is the same as multiplying top and bottom by exp(-max), which "
                               "cancels. Without it exp(1000) is inf in float32 and inf/inf is nan, so the row is nan.",
    "question_toy_attention": "With W_Q = W_K = I the score is just the dot product of the embeddings, a similarity, "
                              "so each word matches itself and words like it best. Learned projections let a word "
                              "look for something else, like a verb looking for its subject.",
}
WRITTEN_BEN_02 = {
    "question_scale": "About 0.96 without scaling, 0.25 with it. Softmax is almost one-hot, so its gradient is "
                      "almost zero and the scores stop learning.",
    "question_mask_before_softmax": "Zeroing after the softmax would leave rows that do not sum to 1.",
}
WRITTEN_DEV_01 = {"question_stable_softmax": "It makes the numbers smaller so the softmax is more accurate."}

CLASS = {
    "ada": {A01: {**answers_01(), **WRITTEN_ADA_01}, A02: {"scaled_dot_product_attention": SDPA_OK},
            A03: answers_03(), A04: answers_04(), A05: answers_05(), A06: answers_06(), A07: answers_07(),
            A08: answers_08()},
    "ben": {A01: answers_01(SOFTMAX_F64, SCORES_EINSUM, SELF_ATTENTION_BUILTIN, MODULE_EINSUM),
            A02: {"scaled_dot_product_attention": SDPA_STYLES, **WRITTEN_BEN_02},
            A03: answers_03(SPLIT_UNFLATTEN, COMBINE_FLATTEN, MHA_INLINE),
            A04: answers_04(causal=CAUSAL_ARANGE, decoder=DECODER_LOGICAL),
            A05: answers_05(PE_FN_EXP_LOG, PE_MODULE_3D, EMBED_POW),
            A06: answers_06(ffn=FFN_FUNCTIONAL, enc=ENC_SUBLAYER, encoder=ENCODER_REDUCE, model=MODEL_INLINE_MASKS,
                            ln=LN_VAR_MEAN),
            A07: answers_07(SHIFT_ROLL, TF_NARROW, NOAM_MATH, LS_DISTRIBUTION, TRAIN_NO_CLIP, beam=BEAM_BATCHED,
                            learn=BPE_REGEX, apply=CORRECT["apply_bpe"]["regex"]),
            A08: answers_08(1)},
    "cho": {A01: {"softmax": SOFTMAX_OK, "attention_scores": SCORES_OK}, A02: {},
            A03: answers_03(), A04: "missing", A05: {},
            A06: {"PositionwiseFeedForward": ("methods", FFN_OK)}, A07: "missing"},
    "dev": {A01: {**answers_01(softmax=SOFTMAX_UNSTABLE), **WRITTEN_DEV_01}, A02: {"scaled_dot_product_attention": SDPA_NO_SCALE},
            A03: answers_03(split=SPLIT_NO_TRANSPOSE), A04: answers_04(causal=CAUSAL_SUBSEQUENT),
            A05: answers_05(fn=PE_FN_SWAPPED),
            A06: answers_06(enc=ENC_PRE_LN, decoder=DECODER_NOT_CHAINED, ln=LN_UNBIASED),
            A07: answers_07(tf=TF_NOT_SHIFTED, noam=NOAM_MAX, ls=LS_OTHERS, beam=BEAM_NO_PENALTY, learn=BPE_UNWEIGHTED),
            A08: answers_08(2, RMSNorm="layer_norm", apply_rotary_embedding="rotate_half",
                            GroupedQueryAttention="rope_on_values", top_p_filter="drops_crossing_token",
                            generate="no_cache")},
    "eun": {A01: answers_01(self_attention=SELF_ATTENTION_SCALED_D_MODEL, module=MODULE_WRONG_DIM),
            A02: {"scaled_dot_product_attention": SDPA_WRONG_DIM},
            A03: answers_03(combine=COMBINE_NO_CONTIGUOUS), A04: answers_04(pad=PAD_FLAT),
            A05: answers_05(fn=PE_FN_EXPONENT_I),
            A06: answers_06(dec=DEC_SELF_TWICE, model=MODEL_NO_CAUSAL, ln=LN_EPS_ON_STD),
            A07: answers_07(shift=SHIFT_LEFT, train=TRAIN_NO_ZERO_GRAD, greedy=GREEDY_NO_STOP,
                            beam=BEAM_EXTENDS_FINISHED, apply=APPLY_FIRST_ONLY),
            A08: answers_08(3, SwiGLU="gate_on_w3", repeat_kv="tiled", online_softmax_attention="acc_not_rescaled",
                            DecoderBlock="post_ln", DecoderLM="copied_weight",
                            sample_next_token="temperature_after_top_p")},
    "fay": {A01: answers_01(scores=SCORES_SWAPPED), A02: {"scaled_dot_product_attention": SDPA_INVERTED_MASK},
            A03: answers_03(mha=MHA_AVERAGED), A04: answers_04(decoder=DECODER_OR),
            A05: answers_05(module=PE_MODULE_ATTRIBUTE),
            A06: answers_06(ffn=FFN_NO_RELU), A07: answers_07(ls=LS_NO_IGNORE, train=TRAIN_MEAN_OF_BATCHES)},
    "gus": {A01: answers_01(softmax=SOFTMAX_SUM_ALL), A02: {"scaled_dot_product_attention": SDPA_HANGS},
            A03: answers_03(mha=MHA_NO_CHECK), A04: answers_04(), A05: answers_05(embed=EMBED_NO_SCALE),
            A06: answers_06(), A07: answers_07(greedy=GREEDY_NO_PAD)},
    "hal": {A01: answers_01(self_attention=SELF_ATTENTION_EXIT),
            A02: {"scaled_dot_product_attention": SDPA_OK},
            A03: answers_03(), A04: answers_04(), A05: answers_05(), A06: answers_06(), A07: answers_07()},
    "ivy": {A01: answers_01(), A02: "missing"},
    "jon": {A01: answers_01(softmax=SOFTMAX_BUILTIN), A02: {"scaled_dot_product_attention": SDPA_MINUS_1E9},
            A03: answers_03(), A04: answers_04(causal=CAUSAL_NO_DIAGONAL), A05: answers_05(module=PE_MODULE_NO_CHECK),
            A06: answers_06(encoder=ENCODER_FINAL_NORM, model=MODEL_LOG_SOFTMAX), A07: answers_07(noam=NOAM_NO_DMODEL, learn=BPE_STRING_REPLACE)},
    "kai": {A02: {"scaled_dot_product_attention": SDPA_COPIED}},
}


def replace_methods(stub: str, methods: str) -> str:
    """The released class with every method after ``__init__`` replaced by ``methods``."""
    lines = stub.splitlines()
    init = next(i for i, line in enumerate(lines) if line.startswith("    def __init__"))
    end = next((i for i in range(init + 1, len(lines))
                if lines[i].startswith("    def ") or lines[i].startswith("    @")), len(lines))
    return "\n".join(lines[:end]).rstrip() + "\n\n" + methods.rstrip("\n")


def fill(release: Path, answers: dict[str, str]) -> nbformat.NotebookNode:
    nb = nbformat.read(release, as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers and isinstance(answers[gid], tuple):  # method bodies under the given __init__
            cell.source = replace_methods(cell.source, answers[gid][1])
        elif gid in answers:
            cell.source = answers[gid].rstrip("\n")
        if cell.cell_type == "code":  # as handed in after "Run All": outputs are cleared by nbgrader
            cell.outputs, cell.execution_count = [], None
    return nb


def main(only: str | None = None) -> None:
    """Write the class (``only``: that student's folder alone, the others left as they are)."""
    if only is None:
        shutil.rmtree(OUT, ignore_errors=True)
    else:
        shutil.rmtree(OUT / only, ignore_errors=True)
    for student, work in CLASS.items():
        if only is not None and student != only:
            continue
        for assignment, answers in work.items():
            if answers == "missing":
                continue
            release = ROOT / "course" / assignment / f"{assignment}.ipynb"
            folder = OUT / student / assignment
            folder.mkdir(parents=True)
            nb = fill(release, answers)
            name = f"{assignment}.ipynb"
            if student == "gus" and assignment == A01:
                # Tampered: the visible softmax test replaced by a print.
                for cell in nb.cells:
                    if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax":
                        cell.source = 'print("softmax: visible tests passed")'
            if student == "hal" and assignment == A02:
                name = f"{assignment} (1).ipynb"  # renamed by a browser download
            text = nbformat.writes(nb) + "\n"
            if student == "ivy" and assignment == A01:
                text = text[: len(text) // 2]  # upload cut off half-way: not valid JSON
            (folder / name).write_text(text)
    write_timestamps()
    print(f"wrote {sum(1 for _ in OUT.rglob('*.ipynb'))} notebooks under {OUT.relative_to(ROOT)}")


# When each notebook was handed in, as `nbgrader submit` / `collect` record it (timestamp.txt, UTC):
# on time for autograder/deadlines.toml (due 2026-12-01T23:59:00+01:00), except LATE.
ON_TIME = "2026-11-30 18:00:00.000000 UTC"
LATE = {("cho", "03_multi_head"): "2026-12-03 09:30:00.000000 UTC"}  # 34.5 h late: 2 started days


def write_timestamps() -> None:
    for folder in sorted(p for p in OUT.glob("*/*") if p.is_dir()):
        stamp = LATE.get((folder.parent.name, folder.name), ON_TIME)
        (folder / "timestamp.txt").write_text(stamp + "\n")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--timestamps"]:
        write_timestamps()
    else:
        main(sys.argv[2] if sys.argv[1:2] == ["--only"] else None)
