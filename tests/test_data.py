"""The Multi30k helpers shipped with notebook 07: verified files, clear errors, batches, BLEU."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "autograder" / "source" / "07_training"))
import multi30k  # noqa: E402


def test_manifest_and_module_agree():
    manifest = json.loads((ROOT / "data" / "multi30k.json").read_text())
    assert manifest["base_url"] == multi30k.BASE_URL
    assert manifest["files"] == multi30k.SHA256
    assert manifest["local_env"] == multi30k.LOCAL_ENV


def test_shared_copy_matches_the_published_sums(local_multi30k):
    sums = dict(line.split()[::-1] for line in (local_multi30k / "SHA256SUMS").read_text().splitlines())
    assert sums == multi30k.SHA256


def test_splits_load_aligned(local_multi30k):
    sizes = {split: len(multi30k.load_split(split, local_multi30k)[0]) for split in multi30k.SPLITS}
    assert sizes == {"train": 29000, "val": 1014, "test_2016_flickr": 1000}
    german, english = multi30k.load_split("val", local_multi30k)
    assert len(german) == len(english) and german[0] and english[0]


def _fake_copy(folder: Path, corrupt: str | None = None, missing: str | None = None) -> None:
    folder.mkdir()
    for name in multi30k.SHA256:
        if name == missing:
            continue
        with gzip.open(folder / name, "wt") as handle:
            handle.write("x\n")


def test_missing_local_file_is_a_clear_error(tmp_path):
    _fake_copy(tmp_path / "copy", missing="val.en.gz")
    with pytest.raises(multi30k.DataError, match="val.en.gz is missing"):
        multi30k.data_files(tmp_path / "copy")


def test_corrupt_local_file_is_a_clear_error(tmp_path, local_multi30k):
    copy = tmp_path / "copy"
    shutil.copytree(local_multi30k, copy)
    (copy / "train.de.gz").write_bytes(b"not the data")
    with pytest.raises(multi30k.DataError, match="train.de.gz is corrupt: sha256"):
        multi30k.load_split("train", copy)
    assert (copy / "train.de.gz").exists(), "a user's own copy is never deleted"


def test_unknown_split_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown split 'test'"):
        multi30k.load_split("test")


def test_failed_download_says_how_to_work_offline(tmp_path, monkeypatch):
    monkeypatch.delenv(multi30k.LOCAL_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(multi30k, "cache_dir", lambda: tmp_path / "cache")

    def offline(url, timeout):
        raise OSError("network is unreachable")

    monkeypatch.setattr(multi30k.urllib.request, "urlopen", offline)
    with pytest.raises(multi30k.DataError, match="MULTI30K_DIR"):
        multi30k.data_files()
    assert not list((tmp_path / "cache" / "multi30k").iterdir()), "no partial file is left behind"


def test_batches_cover_every_pair_once_within_the_token_budget():
    pairs = multi30k.Pairs(src=[[5] * n + [3] for n in range(1, 40)],
                           tgt=[[2] + [6] * (n % 7 + 1) + [3] for n in range(1, 40)])
    loader = multi30k.BatchLoader(pairs, max_tokens=40, shuffle=True, seed=1)
    seen = sorted(i for batch in loader.batches for i in batch)
    assert seen == list(range(len(pairs)))
    for src, tgt in loader:
        assert src.dtype == tgt.dtype == torch.long
        assert max(src.shape[1], tgt.shape[1]) * src.shape[0] <= 40 or src.shape[0] == 1
        assert (tgt[:, 0] == multi30k.BOS_ID).all()
    epochs = [[tuple(src.shape) + tuple(tgt.shape) for src, tgt in loader] for _ in range(2)]
    assert sorted(epochs[0]) == sorted(epochs[1]) and epochs[0] != epochs[1], "same batches, new order each epoch"


def test_decode_ids_cuts_at_eos_and_drops_specials():
    class Pieces:
        def decode(self, ids):
            return " ".join(str(i) for i in ids)

    rows = torch.tensor([[2, 7, 8, 3, 9, 0], [2, 5, 0, 0, 0, 0]])
    assert multi30k.decode_ids(Pieces(), rows) == ["7 8", "5"]


def test_bleu_reports_both_cases_and_signatures():
    scores = multi30k.bleu(["A dog runs on the grass ."], ["a dog runs on the grass ."])
    assert scores["lowercase"].score == pytest.approx(100.0)
    assert scores["cased"].score < 100.0
    assert "case:mixed" in scores["signature"] and "tok:13a" in scores["signature"]
    assert "case:lc" in scores["signature_lc"]
