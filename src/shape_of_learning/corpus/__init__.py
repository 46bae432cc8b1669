"""The corpus stage (paper section 2.1): obtain a verified MediaWiki dump, clean it to prose, sample text windows."""

from pathlib import Path

from shape_of_learning.corpus.clean import clean_dump, clean_wikitext
from shape_of_learning.corpus.fetch import ChecksumError, CorpusUnavailableError, obtain
from shape_of_learning.corpus.media import EXTENSIONS
from shape_of_learning.corpus.windows import read_windows, sample_windows, write_windows

MODALITIES = ("text", *EXTENSIONS)  # what a model reads: the text windows, or the sampled image or audio files
GENSIM_WIKI_SAMPLE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def gensim_test_file(name: str) -> Path:
    """A file of the test data shipped inside gensim's wheel: the demo's real offline data (a Wikipedia XML sample,
    the Lee documents, SimLex-999, WordSim-353)."""
    try:
        import gensim
    except ImportError as error:
        raise ImportError(
            "the demo's offline data comes with gensim: pip install gensim, a dependency of the demo "
            "(requirements/demo.txt)"
        ) from error
    path = Path(gensim.__file__).parent / "test" / "test_data" / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing from this gensim {gensim.__version__} install; reinstall gensim (requirements/demo.txt)"
        )
    return path


def gensim_sample_path() -> Path:
    """The real Wikipedia XML sample (206 pages, bz2) shipped inside gensim's tests: the demo preset's corpus."""
    return gensim_test_file(GENSIM_WIKI_SAMPLE)


__all__ = [
    "MODALITIES",
    "ChecksumError",
    "CorpusUnavailableError",
    "clean_dump",
    "clean_wikitext",
    "gensim_sample_path",
    "gensim_test_file",
    "obtain",
    "read_windows",
    "sample_windows",
    "write_windows",
]
