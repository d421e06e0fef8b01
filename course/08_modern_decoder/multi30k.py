"""Multi30k German->English for notebook 07: files, subword tokenizer, batches, BLEU.

Provided with the assignment (not an exercise). The data is Multi30k task 1 (Elliott,
Frank, Sima'an and Specia, 2016, "Multi30K: Multilingual English-German Image
Descriptions", doi:10.18653/v1/W16-3210): 29,000 training pairs, 1,014 validation pairs
and the 1,000 pairs of test_2016_flickr.

Files are downloaded on first use from the dataset's GitHub repository at a pinned commit
and checked against their sha256 sums; set ``MULTI30K_DIR`` to a folder holding the six
``.gz`` files to use a local copy instead (offline machines, CI). The manifest
``data/multi30k.json`` at the repository root holds the same address and sums (a test
keeps them equal).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import torch

BASE_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/"
    "a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw"
)
SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
}
SPLITS = ("train", "val", "test_2016_flickr")
LOCAL_ENV = "MULTI30K_DIR"
# Special ids of the tokenizer (sentencepiece): shared by both languages.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


class DataError(RuntimeError):
    """The Multi30k files are missing, unreachable or corrupt (the message says which)."""


def cache_dir() -> Path:
    """``data/cache`` of the course checkout when run inside it, else ``~/.cache/transformer-course``."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "data" / "multi30k.json").is_file():
            return folder / "data" / "cache"
    return Path.home() / ".cache" / "transformer-course"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: Path) -> None:
    from tqdm.auto import tqdm

    partial = target.with_suffix(target.suffix + ".part")  # never leave a half file under the real name
    try:
        with urllib.request.urlopen(url, timeout=60) as response, partial.open("wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=target.name, leave=False) as bar:
                for block in iter(lambda: response.read(1 << 16), b""):
                    out.write(block)
                    bar.update(len(block))
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise DataError(
            f"could not download {url}: {err}. Without internet, put the six Multi30k .gz files "
            f"in a folder and set {LOCAL_ENV} to it."
        ) from err
    partial.replace(target)


def data_files(directory: str | Path | None = None) -> Path:
    """The folder holding the six verified ``.gz`` files, downloading what is missing.

    Args:
        directory: a local copy; default ``$MULTI30K_DIR``, else the download cache.

    Raises:
        DataError: a file is missing from a local copy, cannot be downloaded, or has the
            wrong sha256 (a corrupt download is deleted so the next call fetches it again).
    """
    local = directory or os.environ.get(LOCAL_ENV)
    folder = Path(local) if local else cache_dir() / "multi30k"
    if not local:
        folder.mkdir(parents=True, exist_ok=True)
    missing = [name for name in SHA256 if not (folder / name).is_file()]
    if missing and local:
        raise DataError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing from {folder}: "
                        f"{LOCAL_ENV} must name a folder holding {', '.join(SHA256)}")
    for name in missing:
        _download(f"{BASE_URL}/{name}", folder / name)
    for name, expected in SHA256.items():
        path = folder / name
        actual = _sha256(path)
        if actual != expected:
            if not local:
                path.unlink()
            raise DataError(f"{path} is corrupt: sha256 {actual}, expected {expected}" +
                            ("" if local else " (deleted; run again to download it anew)"))
    return folder


def load_split(split: str, directory: str | Path | None = None) -> tuple[list[str], list[str]]:
    """The (German, English) sentences of ``split`` (``train``, ``val`` or ``test_2016_flickr``).

    Raises:
        ValueError: for an unknown split. DataError: see :func:`data_files`.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    folder = data_files(directory)
    sides = []
    for lang in ("de", "en"):
        with gzip.open(folder / f"{split}.{lang}.gz", "rt", encoding="utf-8") as handle:
            sides.append([line.rstrip("\n") for line in handle])
    if len(sides[0]) != len(sides[1]):
        raise DataError(f"{split}: {len(sides[0])} German lines but {len(sides[1])} English lines")
    return sides[0], sides[1]


def train_tokenizer(sentences: list[str], vocab_size: int = 8000, model_type: str = "unigram",
                    name: str | None = None):
    """A sentencepiece subword model trained on ``sentences`` (cached on disk by its settings).

    Ids: ``PAD_ID=0``, ``UNK_ID=1``, ``BOS_ID=2``, ``EOS_ID=3``. One model for both languages
    (a shared vocabulary): German and English share many names, numbers and word pieces.

    Returns:
        ``sentencepiece.SentencePieceProcessor``.
    """
    import sentencepiece as spm

    digest = hashlib.sha256("\n".join(sentences).encode()).hexdigest()[:12]
    name = name or f"spm_{model_type}{vocab_size}_{digest}"
    folder = cache_dir() / "tokenizers"
    folder.mkdir(parents=True, exist_ok=True)
    model_file = folder / f"{name}.model"
    if not model_file.is_file():
        # sentencepiece reports no progress; it takes about 2 s per 60,000 sentences on 2 cores.
        print(f"training a {vocab_size}-piece {model_type} tokenizer on {len(sentences):,} sentences "
              f"(about {max(1, round(2 * len(sentences) / 60_000))} s; cached in {folder} afterwards) ...",
              end=" ", flush=True)
        started = time.perf_counter()
        corpus = folder / f"{name}.txt"
        corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(folder / name), vocab_size=vocab_size,
            model_type=model_type, character_coverage=1.0, pad_id=PAD_ID, unk_id=UNK_ID,
            bos_id=BOS_ID, eos_id=EOS_ID, num_threads=os.cpu_count() or 1, minloglevel=2,
        )
        corpus.unlink()
        print(f"done in {time.perf_counter() - started:.1f} s")
    return spm.SentencePieceProcessor(model_file=str(model_file))


@dataclass
class Pairs:
    """Tokenised parallel sentences: ``src[i]`` (German ids + eos), ``tgt[i]`` (bos + English ids + eos)."""

    src: list[list[int]]
    tgt: list[list[int]]

    def __len__(self) -> int:
        return len(self.src)


def encode_pairs(tokenizer, german: list[str], english: list[str], max_tokens: int = 128) -> Pairs:
    """Encode sentence pairs; pairs longer than ``max_tokens`` on either side are truncated."""
    src = [ids[: max_tokens - 1] + [EOS_ID] for ids in tokenizer.encode(german)]
    tgt = [[BOS_ID] + ids[: max_tokens - 2] + [EOS_ID] for ids in tokenizer.encode(english)]
    return Pairs(src, tgt)


def pad(rows: list[list[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """``(B, max length)`` int64, right-padded with ``pad_id``."""
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


class BatchLoader:
    """Batches of about ``max_tokens`` target tokens, of sentences of similar length.

    Sorting by length before cutting batches leaves little padding (bucketing); the order of
    the batches is shuffled each epoch. Yields ``(src (B, S), tgt (B, T + 1))`` int64.
    """

    def __init__(self, pairs: Pairs, max_tokens: int = 4096, shuffle: bool = True, seed: int = 0):
        self.pairs, self.shuffle, self.epoch, self.seed = pairs, shuffle, 0, seed
        order = sorted(range(len(pairs)), key=lambda i: (len(pairs.tgt[i]), len(pairs.src[i])))
        self.batches, batch, longest = [], [], 0
        for i in order:
            longest = max(longest, len(pairs.tgt[i]), len(pairs.src[i]))
            if batch and longest * (len(batch) + 1) > max_tokens:
                self.batches.append(batch)
                batch, longest = [], max(len(pairs.tgt[i]), len(pairs.src[i]))
            batch.append(i)
        if batch:
            self.batches.append(batch)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        batches = list(self.batches)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(batches)
            self.epoch += 1
        for batch in batches:
            yield pad([self.pairs.src[i] for i in batch]), pad([self.pairs.tgt[i] for i in batch])


def decode_ids(tokenizer, rows: torch.Tensor) -> list[str]:
    """Token ids ``(B, L)`` -> sentences, cut at the first ``EOS_ID``, ``BOS``/``PAD`` dropped."""
    texts = []
    for row in rows.tolist():
        ids = row[: row.index(EOS_ID)] if EOS_ID in row else row
        texts.append(tokenizer.decode([i for i in ids if i not in (BOS_ID, PAD_ID)]))
    return texts


def bleu(hypotheses: list[str], references: list[str]) -> dict:
    """Corpus BLEU with sacrebleu, cased (13a, the default) and lowercased.

    Returns:
        ``{"cased": BLEUScore, "lowercase": BLEUScore, "signature": str, "signature_lc": str}``.
    """
    import sacrebleu

    cased = sacrebleu.metrics.BLEU()
    lowercase = sacrebleu.metrics.BLEU(lowercase=True)
    return {
        "cased": cased.corpus_score(hypotheses, [references]),
        "lowercase": lowercase.corpus_score(hypotheses, [references]),
        "signature": str(cased.get_signature()),
        "signature_lc": str(lowercase.get_signature()),
    }
