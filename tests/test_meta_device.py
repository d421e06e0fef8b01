"""Training steps of notebook 07's and 08's models on the meta device: no GPU needed to catch a
tensor made on the CPU inside a model (a table of frequencies, a mask, positions), which on a GPU
raises "Expected all tensors to be on the same device". Meta tensors have shapes and no values,
and PyTorch refuses to mix them with CPU tensors, as it refuses to mix CUDA and CPU ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autograder" / "reference"))

from course_reference import nb04_masking as ref04  # noqa: E402
from course_reference import nb06_transformer as ref06  # noqa: E402
from course_reference import nb07_training as ref07  # noqa: E402
from course_reference import nb08_modern_decoder as ref08  # noqa: E402

META = torch.device("meta")


def test_a_cpu_tensor_mixed_into_meta_raises():
    """What the tests below rely on: the meta device refuses a CPU operand, as CUDA does."""
    with pytest.raises(RuntimeError):
        torch.ones(3, device=META) * torch.arange(3.0)


def test_training_step_of_07s_transformer_on_meta():
    model = ref06.Transformer(50, 50, d_model=32, num_heads=4, num_layers=2, d_ff=64, pad_id=0).to(META)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    src = torch.randint(1, 50, (3, 7), device=META)
    tgt = torch.randint(1, 50, (3, 6), device=META)
    decoder_input, labels = ref07.make_teacher_forcing_batch(tgt, 0)
    logits = model(src, decoder_input)
    loss = ref07.LabelSmoothingLoss(0.1, ignore_index=0)(logits, labels)
    loss.backward()
    optimizer.step()
    assert logits.device == META and logits.shape == (3, decoder_input.size(1), 50)
    mask = ref04.make_decoder_mask(decoder_input, 0)
    assert mask.device == META


def test_training_step_and_cached_step_of_08s_decoder_on_meta():
    model = ref08.DecoderLM(60, d_model=32, num_heads=4, num_kv_heads=2, d_ff=64, num_layers=2).to(META)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 60, (2, 9), device=META)
    logits, past = model(tokens[:, :-1])
    F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
    optimizer.step()
    with torch.no_grad():
        step, _ = model(tokens[:, -1:], past)  # one new position after a cache of 8: rotary positions 8..8
    assert step.device == META and step.shape == (2, 1, 60)
    rotated = ref08.apply_rotary_embedding(torch.empty(2, 5, 8, device=META), torch.arange(5))  # CPU positions
    assert rotated.device == META
