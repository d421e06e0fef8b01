"""The hidden reference implementation agrees with PyTorch's built-ins."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autograder" / "reference"))
from course_reference import nb01_self_attention as ref01  # noqa: E402
from course_reference.nb02_scaled_dot_product import scaled_dot_product_attention  # noqa: E402

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: {"rtol": 1e-5, "atol": 1e-6}, torch.float64: {"rtol": 1e-10, "atol": 1e-12}}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_equals_torch(dtype, dim):
    x = torch.randn(3, 4, 5, dtype=dtype) * 10
    torch.testing.assert_close(ref01.softmax(x, dim), torch.softmax(x, dim), **TOL[dtype])


def test_softmax_is_stable_on_large_inputs():
    x = torch.tensor([[1000.0, 999.0, -1000.0]])
    p = ref01.softmax(x)
    assert torch.isfinite(p).all()
    torch.testing.assert_close(p, torch.softmax(x, -1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_self_attention_equals_unscaled_sdpa(dtype):
    x = torch.randn(2, 5, 8, dtype=dtype)
    w_q, w_k, w_v = (torch.randn(8, n, dtype=dtype) for n in (4, 4, 6))
    expected = F.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, scale=1.0)
    torch.testing.assert_close(ref01.self_attention(x, w_q, w_k, w_v), expected, **TOL[dtype])


def test_self_attention_module_matches_function():
    layer = ref01.SelfAttention(8, d_k=4, d_v=6)
    x = torch.randn(2, 5, 8)
    out, weights = layer(x)
    assert weights.shape == (2, 5, 5) and out.shape == (2, 5, 6)
    expected = ref01.self_attention(x, layer.w_q.weight.T, layer.w_k.weight.T, layer.w_v.weight.T)
    torch.testing.assert_close(out, expected)
    assert ref01.SelfAttention(8).w_v.out_features == 8


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "random"])
def test_sdpa_equals_torch(dtype, mask_kind):
    b, h, lq, lk, d = 2, 3, 5, 6, 8
    q, k, v = (torch.randn(b, h, n, d, dtype=dtype) for n in (lq, lk, lk))
    mask = {
        "none": None,
        "padding": (torch.arange(lk) < torch.tensor([6, 2])[:, None])[:, None, None, :],
        "causal": torch.ones(lq, lk, dtype=torch.bool).tril(),
        "random": torch.rand(b, h, lq, lk) > 0.4,
    }[mask_kind]
    if mask is not None:
        mask = mask.clone()
        mask[..., 0] = True  # the built-in returns NaN for fully blocked rows
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL[dtype])
    torch.testing.assert_close(weights.sum(-1), torch.ones(b, h, lq, dtype=dtype), **TOL[dtype])
    if mask is not None:
        assert (weights[~mask.expand_as(weights)] == 0).all(), "blocked weights must be exactly 0"


@pytest.mark.parametrize("dtype", DTYPES + [torch.bfloat16])
def test_sdpa_fully_masked_rows_are_zero_not_nan(dtype):
    q, k, v = (torch.randn(2, 4, 8).to(dtype) for _ in range(3))
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    mask[0, 2] = False
    q.requires_grad_()
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert (out[0, 2] == 0).all() and (weights[0, 2] == 0).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all(), "gradients must stay finite with fully blocked rows"
    # The other rows equal the built-in's.
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
    keep = mask.any(-1)
    torch.testing.assert_close(out.float()[keep], expected[keep], rtol=2e-2, atol=2e-2)


def test_sdpa_rejects_non_bool_mask():
    q = torch.randn(1, 2, 4)
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product_attention(q, q, q, mask=torch.ones(2, 2))


def test_sdpa_dropout_keeps_expectation():
    torch.manual_seed(0)
    q, k = torch.randn(1, 3, 8), torch.randn(1, 4, 8)
    v = torch.randn(1, 4, 8) + 3
    expected, _ = scaled_dot_product_attention(q, k, v)
    out, _ = scaled_dot_product_attention(q.expand(4000, -1, -1), k.expand(4000, -1, -1),
                                          v.expand(4000, -1, -1), dropout_p=0.5)
    assert not torch.allclose(out[0], expected[0])
    torch.testing.assert_close(out.mean(0), expected[0], rtol=0, atol=0.15)


# ----------------------------------------------------------------- notebooks 03-05
from course_reference import nb03_multi_head as ref03  # noqa: E402
from course_reference import nb04_masking as ref04  # noqa: E402
from course_reference import nb05_positional_encoding as ref05  # noqa: E402


def _torch_mha_from(mine: torch.nn.Module, d_model: int, num_heads: int) -> torch.nn.MultiheadAttention:
    theirs = torch.nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([mine.w_q.weight, mine.w_k.weight, mine.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([mine.w_q.bias, mine.w_k.bias, mine.w_v.bias]))
        theirs.out_proj.weight.copy_(mine.w_o.weight)
        theirs.out_proj.bias.copy_(mine.w_o.bias)
    return theirs


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention_equals_torch(dtype):
    d_model, h = 16, 4
    mine = ref03.MultiHeadAttention(d_model, h).to(dtype).eval()
    theirs = _torch_mha_from(mine, d_model, h).to(dtype).eval()
    q, kv = torch.randn(2, 5, d_model, dtype=dtype), torch.randn(2, 7, d_model, dtype=dtype)
    lengths = torch.tensor([7, 4])
    keep = torch.arange(7) < lengths[:, None]  # (B, Lk), True = real token
    out, weights = mine(q, kv, kv, mask=keep[:, None, None, :])
    expected, avg = theirs(q, kv, kv, key_padding_mask=~keep)  # PyTorch: True = ignore
    torch.testing.assert_close(out, expected, **TOL[dtype])
    torch.testing.assert_close(weights.mean(dim=1), avg, **TOL[dtype])
    assert weights.shape == (2, h, 5, 7)


def test_split_and_combine_heads_are_inverse_and_per_position():
    x = torch.randn(2, 5, 12)
    heads = ref03.split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    torch.testing.assert_close(heads[:, 1, 2], x[:, 2, 4:8])  # head 1 of position 2
    torch.testing.assert_close(ref03.combine_heads(heads), x)
    with pytest.raises(ValueError, match="divisible"):
        ref03.MultiHeadAttention(10, 3)


def test_masks_match_torch_conventions():
    causal = ref04.make_causal_mask(5)
    assert causal.dtype == torch.bool and causal.shape == (1, 1, 5, 5)
    additive = torch.nn.Transformer.generate_square_subsequent_mask(5)  # -inf = blocked
    assert torch.equal(causal[0, 0], additive == 0)
    tokens = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 1]])
    pad = ref04.make_padding_mask(tokens, pad_id=0)
    assert pad.shape == (2, 1, 1, 4) and pad[0, 0, 0].tolist() == [True, True, False, False]
    dec = ref04.make_decoder_mask(tokens, pad_id=0)
    assert dec.shape == (2, 1, 4, 4)
    assert torch.equal(dec, pad & ref04.make_causal_mask(4))
    assert ref04.make_causal_mask(3, device="meta").device.type == "meta"


def test_positional_encoding_formula():
    pe = ref05.sinusoidal_positional_encoding(50, 8)
    assert pe.dtype == torch.float32 and pe.shape == (50, 8)
    for p in (0, 1, 17, 49):
        for i in range(4):
            angle = p / 10000 ** (2 * i / 8)
            assert abs(pe[p, 2 * i].item() - math.sin(angle)) < 1e-6
            assert abs(pe[p, 2 * i + 1].item() - math.cos(angle)) < 1e-6
    with pytest.raises(ValueError, match="even"):
        ref05.sinusoidal_positional_encoding(10, 7)


def test_positional_encoding_module_and_embedding():
    module = ref05.PositionalEncoding(8, dropout=0.0, max_len=20).eval()
    assert "pe" in dict(module.named_buffers()) and not list(module.parameters())
    x = torch.randn(2, 6, 8)
    torch.testing.assert_close(module(x), x + ref05.sinusoidal_positional_encoding(20, 8)[:6])
    with pytest.raises(ValueError, match="max_len"):
        module(torch.randn(1, 21, 8))
    emb = ref05.TokenEmbedding(11, 16)
    tokens = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(emb(tokens), emb.embedding(tokens) * 4.0)


# ---------------------------------------------------------------- notebooks 06 and 07
from course_reference import nb06_transformer as ref06  # noqa: E402
from course_reference import nb07_training as ref07  # noqa: E402
from course_reference.nb04_masking import make_causal_mask  # noqa: E402


def _copy_attention(ours, theirs):
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.load_state_dict(ours.w_o.state_dict())


@torch.no_grad()
def _torch_twin(model: ref06.Transformer, d_model: int, heads: int, layers: int, d_ff: int) -> torch.nn.Transformer:
    twin = torch.nn.Transformer(d_model, heads, layers, layers, d_ff, dropout=0.0, batch_first=True).eval()
    twin.encoder.norm = twin.decoder.norm = None  # the SPEC's stacks have no final LayerNorm
    for mine, their in zip(model.encoder.layers, twin.encoder.layers, strict=True):
        _copy_attention(mine.self_attn, their.self_attn)
        for a, b in [("feed_forward.w_1", "linear1"), ("feed_forward.w_2", "linear2"), ("norm1", "norm1"),
                     ("norm2", "norm2")]:
            their.get_submodule(b).load_state_dict(mine.get_submodule(a).state_dict())
    for mine, their in zip(model.decoder.layers, twin.decoder.layers, strict=True):
        _copy_attention(mine.self_attn, their.self_attn)
        _copy_attention(mine.cross_attn, their.multihead_attn)
        for a, b in [("feed_forward.w_1", "linear1"), ("feed_forward.w_2", "linear2"), ("norm1", "norm1"),
                     ("norm2", "norm2"), ("norm3", "norm3")]:
            their.get_submodule(b).load_state_dict(mine.get_submodule(a).state_dict())
    return twin


def test_transformer_equals_nn_transformer_with_the_same_weights():
    torch.manual_seed(0)
    model = ref06.Transformer(30, 40, d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.0).eval()
    twin = _torch_twin(model, 32, 4, 2, 64)
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 0]])
    with torch.no_grad():
        ours = model.generator(model.decode(tgt, model.encode(src, src[:, None, None, :] != 0),
                                            src[:, None, None, :] != 0,
                                            (tgt[:, None, None, :] != 0) & make_causal_mask(4)))
        theirs = model.generator(twin(
            model.positional_encoding(model.src_embed(src)), model.positional_encoding(model.tgt_embed(tgt)),
            tgt_mask=~make_causal_mask(4)[0, 0], src_key_padding_mask=src == 0, memory_key_padding_mask=src == 0))
        forward = model(src, tgt)
    real = tgt != 0
    torch.testing.assert_close(ours[real], theirs[real], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(forward, ours)


def test_transformer_parameter_count_matches_nn_transformer_base():
    model = ref06.Transformer(100, 100)  # the base configuration
    twin = torch.nn.Transformer(batch_first=True)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    final_norms = count(twin.encoder.norm) + count(twin.decoder.norm)
    assert count(model.encoder) + count(model.decoder) == count(twin) - final_norms


def test_decoder_is_causal_and_dropout_only_in_training():
    torch.manual_seed(1)
    model = ref06.Transformer(20, 20, d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.3).eval()
    src, tgt = torch.randint(1, 20, (2, 6)), torch.randint(1, 20, (2, 5))
    changed = tgt.clone()
    changed[:, 3:] = torch.randint(1, 20, (2, 2))
    with torch.no_grad():
        torch.testing.assert_close(model(src, changed)[:, :3], model(src, tgt)[:, :3])
        assert torch.equal(model(src, tgt), model(src, tgt))
        model.train()
        assert not torch.equal(model(src, tgt), model(src, tgt))


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.25])
def test_label_smoothing_loss_equals_cross_entropy(smoothing):
    logits = torch.randn(3, 7, 11, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 11, (3, 7))
    target[:, 5:] = 0
    ours = ref07.LabelSmoothingLoss(smoothing, ignore_index=0)(logits, target)
    theirs = F.cross_entropy(logits.reshape(-1, 11), target.reshape(-1), label_smoothing=smoothing, ignore_index=0)
    torch.testing.assert_close(ours, theirs)
    g_ours, = torch.autograd.grad(ours, logits)
    g_theirs, = torch.autograd.grad(theirs, logits)
    torch.testing.assert_close(g_ours, g_theirs)


def test_noam_lr_peaks_at_warmup_and_matches_the_paper():
    rates = [ref07.noam_lr(s, 512, 4000) for s in range(1, 10001)]
    assert max(range(10000), key=rates.__getitem__) + 1 == 4000
    assert math.isclose(rates[3999], 512**-0.5 * 4000**-0.5)
    assert math.isclose(ref07.noam_lr(16000, 512, 4000), 512**-0.5 * 16000**-0.5)
    with pytest.raises(ValueError, match="counts from 1"):
        ref07.noam_lr(0, 512, 4000)


def test_teacher_forcing_shift_and_greedy_decode_learn_a_copy_task():
    """A copy task trains to near-zero loss in seconds, and greedy decoding then copies."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = ref06.Transformer(12, 12, d_model=32, num_heads=4, num_layers=1, d_ff=64, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    batches = []
    for _ in range(150):
        src = torch.randint(4, 12, (32, 6), generator=gen)
        tgt = torch.cat([torch.full((32, 1), 2), src, torch.full((32, 1), 3)], dim=1)
        batches.append((torch.cat([src, torch.full((32, 1), 3)], 1), tgt))
    loss = ref07.train_epoch(model, batches, optimizer, None, _flat_cross_entropy, "cpu")
    assert loss < 1.0
    final = ref07.train_epoch(model, batches[:30], optimizer, None, _flat_cross_entropy, "cpu")
    assert final < 0.1
    assert torch.equal(ref07.shift_right(batches[0][1][:, 1:], 2), batches[0][1][:, :-1])
    model.eval()
    src = batches[0][0][:4]
    out = ref07.greedy_decode(model, src, 12, 2, 3)
    assert out.shape == (4, 8) and torch.equal(out[:, 1:], src)


def _flat_cross_entropy(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 16), (1, 1, 4)])
def test_layer_norm_equals_torch(dtype, shape):
    from course_reference.nb06_transformer import layer_norm

    gen = torch.Generator().manual_seed(6)
    x = torch.randn(*shape, generator=gen, dtype=dtype) * 3 + 1
    weight, bias = (torch.randn(shape[-1], generator=gen, dtype=dtype) for _ in range(2))
    got = layer_norm(x, weight, bias)
    assert got.dtype == dtype
    torch.testing.assert_close(got, F.layer_norm(x, (shape[-1],), weight, bias, 1e-5), **TOL[dtype])
    torch.testing.assert_close(layer_norm(x, weight, bias, eps=0.5), F.layer_norm(x, (shape[-1],), weight, bias, 0.5),
                               **TOL[dtype])


def test_learn_bpe_reproduces_the_published_example():
    # The corpus of Sennrich et al. (2016), Algorithm 1, run with its published code: the same
    # ten merges (its ties fall to the pair counted first, as here).
    merges = ref07.learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10)
    assert merges == [("e", "s"), ("es", "t"), ("est", "</w>"), ("l", "o"), ("lo", "w"), ("n", "e"),
                      ("ne", "w"), ("new", "est</w>"), ("low", "</w>"), ("w", "i")]
    assert ref07.apply_bpe("lowest", merges) == ["low", "est</w>"]
    assert ref07.learn_bpe({"ab": 3, "b": 2}, 10) == [("b", "</w>"), ("a", "b</w>")]
    with pytest.raises(ValueError, match="num_merges"):
        ref07.learn_bpe({"a": 1}, -1)


def _has_tie(word_counts: dict[str, int], num_merges: int) -> bool:
    vocab = {tuple(w) + ("</w>",): c for w, c in word_counts.items()}
    for _ in range(num_merges):
        pairs: dict = {}
        for symbols, count in vocab.items():
            for pair in zip(symbols, symbols[1:], strict=False):
                pairs[pair] = pairs.get(pair, 0) + count
        if not pairs:
            return False
        top = sorted(pairs.values(), reverse=True)
        if len(top) > 1 and top[0] == top[1]:
            return True
        best = max(pairs, key=pairs.get)
        vocab = {ref07._merge_pair(s, best): c for s, c in vocab.items()}
    return False


def test_bpe_check_corpora_have_no_ties():
    from course_reference.checks.nb07 import BPE_CORPORA

    assert _has_tie({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 10)  # the helper can see a tie
    for word_counts, num_merges in BPE_CORPORA:
        assert not _has_tie(word_counts, num_merges), word_counts


def _random_model(seed: int, vocab: int = 6) -> ref06.Transformer:
    gen = torch.Generator().manual_seed(seed)
    model = ref06.Transformer(7, vocab, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0, pad_id=0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.7)
    return model.eval()


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 1.0])
def test_beam_search_with_a_wide_beam_finds_the_best_hypothesis_by_exhaustive_search(length_penalty):
    # Vocabulary 6 (pad 0, bos 2, eos 3), at most 3 generated tokens: a beam of 6**3 keeps every
    # hypothesis, so beam search must return the best of all, scored independently here.
    import itertools

    model, src = _random_model(1), torch.tensor([[4, 5, 6, 1], [6, 6, 0, 0]])
    got = ref07.beam_search(model, src, 4, 2, 3, beam_size=6**3, length_penalty=length_penalty)
    for row in range(2):
        memory_src = src[row:row + 1]
        best, best_score = None, -math.inf
        for n in (1, 2, 3):
            for tail in itertools.product(range(6), repeat=n):
                if 3 in tail[:-1] or (n < 3 and tail[-1] != 3):
                    continue  # eos ends a hypothesis; shorter than max only when finished
                ys = torch.tensor([[2, *tail]])
                logp = F.log_softmax(model(memory_src, ys[:, :-1]).double(), -1)[0]
                total = sum(logp[t, tail[t]].item() for t in range(n))
                score = total / ((5 + n) / 6) ** length_penalty
                if score > best_score:
                    best, best_score = [2, *tail], score
        row_out = got[row].tolist()
        assert row_out[:len(best)] == best and all(t == 0 for t in row_out[len(best):]), (row_out, best)


def test_beam_search_of_width_one_is_greedy_decoding():
    for seed in range(3):
        model = _random_model(seed, vocab=9)
        src = torch.tensor([[4, 5, 6, 1], [6, 6, 0, 0], [1, 4, 0, 0]])
        assert torch.equal(ref07.beam_search(model, src, 8, 2, 3, beam_size=1),
                           ref07.greedy_decode(model, src, 8, 2, 3))


def test_tied_embeddings_share_one_matrix_and_save_its_parameters():
    untied, tied = ref06.Transformer(50, 60, d_model=16, num_heads=2, num_layers=1, d_ff=32), \
        ref06.Transformer(50, 60, d_model=16, num_heads=2, num_layers=1, d_ff=32, tie_embeddings=True)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(untied) - count(tied) == 60 * 16
    assert tied.generator.weight is tied.tgt_embed.embedding.weight
    logits = tied(torch.tensor([[4, 5, 6]]), torch.tensor([[2, 7]]))
    logits.sum().backward()  # one gradient, from both uses
    assert tied.tgt_embed.embedding.weight.grad is not None and logits.shape == (1, 2, 60)


# ------------------------------------------------------------------ notebook 08: a modern decoder
from course_reference import nb08_modern_decoder as ref08  # noqa: E402


def test_rmsnorm_equals_nn_rmsnorm():
    norm, builtin = ref08.RMSNorm(12, eps=1e-5), torch.nn.RMSNorm(12, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(12))
        builtin.weight.copy_(norm.weight)
    x = torch.randn(3, 4, 12) * 3 + 1
    torch.testing.assert_close(norm(x), builtin(x))


def test_rotary_embedding_equals_the_complex_form_and_depends_on_offsets_only():
    x, positions = torch.randn(2, 3, 6, 8, dtype=torch.float64), torch.tensor([0, 4, 5, 9, 30, 31])
    z = torch.view_as_complex(x.reshape(2, 3, 6, 4, 2).contiguous())
    angles = ref08.rotary_angles(positions, 8)
    rotated = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2)
    torch.testing.assert_close(ref08.apply_rotary_embedding(x, positions), rotated)
    q, k = torch.randn(1, 16, dtype=torch.float64), torch.randn(1, 16, dtype=torch.float64)
    rope = ref08.apply_rotary_embedding
    scores = [(rope(q, torch.tensor([m])) @ rope(k, torch.tensor([n])).T).item()
              for m, n in [(7, 2), (105, 100), (1005, 1000)]]
    assert max(scores) - min(scores) < 1e-9
    with pytest.raises(ValueError, match="even"):
        ref08.apply_rotary_embedding(torch.zeros(2, 3, 5), torch.arange(3))


def test_grouped_query_attention_equals_sdpa_with_enable_gqa_and_its_cache_is_exact():
    torch.manual_seed(0)
    layer = ref08.GroupedQueryAttention(24, num_heads=6, num_kv_heads=2)
    x = torch.randn(2, 7, 24)
    out, (k, v) = layer(x)
    q = ref08.apply_rotary_embedding(layer.w_q(x).view(2, 7, 6, 4).transpose(1, 2), torch.arange(7))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out, layer.w_o(expected.transpose(1, 2).reshape(2, 7, 24)))
    first, cache = layer(x[:, :4])
    second, _ = layer(x[:, 4:], cache)
    torch.testing.assert_close(torch.cat([first, second], 1), out)


def test_grouped_query_attention_with_as_many_groups_as_heads_is_multi_head_attention():
    torch.manual_seed(1)
    layer = ref08.GroupedQueryAttention(16, num_heads=4, num_kv_heads=4)
    x = torch.randn(2, 5, 16)
    q, k, v = (w(x).view(2, 5, 4, 4).transpose(1, 2) for w in (layer.w_q, layer.w_k, layer.w_v))
    q, k = (ref08.apply_rotary_embedding(t, torch.arange(5)) for t in (q, k))
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(layer(x)[0], layer.w_o(heads.transpose(1, 2).reshape(2, 5, 16)))


@pytest.mark.parametrize("causal", [False, True])
def test_online_softmax_attention_equals_sdpa_to_1e5(causal):
    q, k, v = torch.randn(2, 3, 20, 8) * 4, torch.randn(2, 3, 45, 8) * 4, torch.randn(2, 3, 45, 5)
    mask = torch.ones(20, 45, dtype=torch.bool).tril(25) if causal else None
    for tile in (1, 7, 16, 64):
        torch.testing.assert_close(ref08.online_softmax_attention(q, k, v, tile, causal),
                                   F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5)


def test_decoder_lm_ties_its_output_layer_and_caches_match_a_full_pass():
    torch.manual_seed(2)
    model = ref08.DecoderLM(30, 16, 4, 2, 40, 2)
    assert model.lm_head.weight is model.embedding.weight
    tokens = torch.randint(0, 30, (2, 9))
    logits, _ = model(tokens)
    first, caches = model(tokens[:, :6])
    second, _ = model(tokens[:, 6:], caches)
    torch.testing.assert_close(torch.cat([first, second], 1), logits)


def test_top_p_keeps_the_fewest_tokens_that_reach_p_and_sampling_follows_it():
    logits = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    assert torch.isfinite(ref08.top_p_filter(logits, 0.7)).tolist() == [True, True, False, False]
    assert torch.isfinite(ref08.top_p_filter(logits, 0.81)).tolist() == [True, True, True, False]
    torch.manual_seed(0)
    draws = ref08.sample_next_token(logits.expand(40000, 4), temperature=1.0, top_p=0.7)
    freq = torch.bincount(draws, minlength=4) / 40000
    torch.testing.assert_close(freq, torch.tensor([0.625, 0.375, 0.0, 0.0]), atol=0.01, rtol=0)
    assert torch.equal(ref08.sample_next_token(logits[None], temperature=0.0), torch.tensor([0]))
