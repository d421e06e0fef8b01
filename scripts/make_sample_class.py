"""Write the sample class, ``autograder/submitted/``, from the student release in ``course/``.

Each student's answers are written below as a student would type them into the answer
cells; what each one should score is in ``autograder/sample_class.toml`` (the tests
check it). Re-run after changing a notebook's stubs:

    .venv/bin/python scripts/make_sample_class.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

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
    # additive mask: 0 where allowed, -inf where blocked
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    q, k = query.double(), key.double()
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores + _mask_bias(mask, scores.dtype)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        # rows with nothing to attend to are NaN after softmax
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


def answers_01(softmax=SOFTMAX_OK, scores=SCORES_OK, self_attention=SELF_ATTENTION_OK, module=MODULE_OK):
    return {"softmax": softmax, "attention_scores": scores, "self_attention": self_attention,
            "SelfAttention": module}


# student -> assignment -> answers (None: leave every stub as released), or a special action.
CLASS = {
    "ada": {A01: answers_01(), A02: {"scaled_dot_product_attention": SDPA_OK}},
    "ben": {A01: answers_01(SOFTMAX_F64, SCORES_EINSUM, SELF_ATTENTION_BUILTIN, MODULE_EINSUM),
            A02: {"scaled_dot_product_attention": SDPA_STYLES}},
    "cho": {A01: {"softmax": SOFTMAX_OK, "attention_scores": SCORES_OK}, A02: {}},
    "dev": {A01: answers_01(softmax=SOFTMAX_UNSTABLE), A02: {"scaled_dot_product_attention": SDPA_NO_SCALE}},
    "eun": {A01: answers_01(self_attention=SELF_ATTENTION_SCALED_D_MODEL, module=MODULE_WRONG_DIM),
            A02: {"scaled_dot_product_attention": SDPA_WRONG_DIM}},
    "fay": {A01: answers_01(scores=SCORES_SWAPPED), A02: {"scaled_dot_product_attention": SDPA_INVERTED_MASK}},
    "gus": {A01: answers_01(softmax=SOFTMAX_SUM_ALL), A02: {"scaled_dot_product_attention": SDPA_HANGS}},
    "hal": {A01: answers_01(self_attention=SELF_ATTENTION_EXIT),
            A02: {"scaled_dot_product_attention": SDPA_OK}},
    "ivy": {A01: answers_01(), A02: "missing"},
    "jon": {A01: answers_01(softmax=SOFTMAX_BUILTIN), A02: {"scaled_dot_product_attention": SDPA_MINUS_1E9}},
}


def fill(release: Path, answers: dict[str, str]) -> nbformat.NotebookNode:
    nb = nbformat.read(release, as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid].rstrip("\n")
        if cell.cell_type == "code":  # as handed in after "Run All": outputs are cleared by nbgrader
            cell.outputs, cell.execution_count = [], None
    return nb


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    for student, work in CLASS.items():
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
    print(f"wrote {sum(1 for _ in OUT.rglob('*.ipynb'))} notebooks under {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
