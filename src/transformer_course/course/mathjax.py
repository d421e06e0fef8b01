"""MathJax shipped beside the HTML this project writes (feedback pages, the book), so formulas
render without a network: nbconvert and Sphinx load MathJax from a CDN by default, and a
student reading feedback offline would see raw LaTeX.

The package comes from the npm registry once (pinned version and sha256), is cached under
``data/cache/mathjax`` (``MATHJAX_DIR`` names a local copy of the package instead), and only
the CommonHTML build and its fonts are copied next to the pages (about 1.7 MB).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import tarfile
import urllib.request
import warnings
from pathlib import Path

VERSION = "3.2.2"
URL = f"https://registry.npmjs.org/mathjax/-/mathjax-{VERSION}.tgz"
SHA256 = "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09"
LOCAL_ENV = "MATHJAX_DIR"  # a folder holding the package's es5/ build (e.g. an unpacked npm tarball)
SCRIPT = "tex-chtml-full.js"
FONTS = Path("output") / "chtml" / "fonts" / "woff-v2"

# nbconvert's MathJax 2 block (a CDN script and its x-mathjax-config), as nbgrader's feedback
# template writes it.
_NBCONVERT_BLOCK = re.compile(
    r'<script src="https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/[^"]*"> ?</script>.*?'
    r"<!-- End of mathjax configuration -->", re.S)
# The same delimiters as nbconvert's configuration: $..$ and \(..\) inline, $$..$$ and \[..\] displayed.
_CONFIG = ("<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], "
           "displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true}};</script>")


def _cache() -> Path:
    root = Path(__file__).resolve().parents[3]
    return root / "data" / "cache" / f"mathjax-{VERSION}"


def es5_build() -> Path | None:
    """The package's ``es5`` folder: ``$MATHJAX_DIR``, else the cache, downloading it once.

    Returns None (with a warning) when it cannot be had: pages then keep the CDN.
    """
    local = os.environ.get(LOCAL_ENV)
    if local:
        folder = Path(local) / "es5" if (Path(local) / "es5").is_dir() else Path(local)
        if not (folder / SCRIPT).is_file():
            warnings.warn(f"{LOCAL_ENV}={local} holds no es5/{SCRIPT}; pages load MathJax from the CDN", stacklevel=2)
            return None
        return folder
    folder = _cache() / "es5"
    if (folder / SCRIPT).is_file():
        return folder
    try:
        with urllib.request.urlopen(URL, timeout=60) as response:
            data = response.read()
    except OSError as err:
        warnings.warn(f"could not download MathJax ({URL}: {err}); pages load it from the CDN", stacklevel=2)
        return None
    if hashlib.sha256(data).hexdigest() != SHA256:
        warnings.warn(f"{URL} has an unexpected sha256; not used, pages load MathJax from the CDN", stacklevel=2)
        return None
    wanted = (f"package/es5/{SCRIPT}", f"package/es5/{FONTS.as_posix()}/")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(wanted)]
        tar.extractall(_cache() / "unpacked", members=members, filter="data")
    (_cache() / "unpacked" / "package" / "es5").rename(folder)
    shutil.rmtree(_cache() / "unpacked")
    return folder


def install(target: Path) -> Path | None:
    """Copy the MathJax script and fonts into ``target`` (a folder); returns the script's path."""
    source = es5_build()
    if source is None:
        return None
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / SCRIPT, target / SCRIPT)
    shutil.copytree(source / FONTS, target / FONTS, dirs_exist_ok=True)
    return target / SCRIPT


def use_local(html: str, script_url: str) -> str:
    """``html`` (an nbconvert page) with its CDN MathJax replaced by the script at ``script_url``
    (relative to the page), configured for the same delimiters."""
    local = f'{_CONFIG}\n<script src="{script_url}" async></script>'
    return _NBCONVERT_BLOCK.sub(lambda _: local, html, count=1)
