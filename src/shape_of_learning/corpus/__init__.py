"""The corpus stage (paper section 2.1): obtain a verified MediaWiki dump, clean it to prose, sample text windows."""

from pathlib import Path

from shape_of_learning.corpus.clean import clean_dump, clean_wikitext
from shape_of_learning.corpus.fetch import ChecksumError, CorpusUnavailableError, obtain
from shape_of_learning.corpus.windows import read_windows, sample_windows, windows_metadata, write_windows

GENSIM_SAMPLE = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def gensim_sample_path() -> Path:
    """The real Wikipedia XML sample (206 pages, bz2) shipped inside gensim's tests: the demo preset's corpus."""
    try:
        import gensim
    except ImportError as error:
        raise ImportError("the demo corpus comes with gensim: pip install gensim, an optional dependency of the "
                          "demo preset") from error
    path = Path(gensim.__file__).parent / GENSIM_SAMPLE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from this gensim {gensim.__version__} install; reinstall gensim")
    return path


__all__ = ["ChecksumError", "CorpusUnavailableError", "clean_dump", "clean_wikitext", "gensim_sample_path", "obtain",
           "read_windows", "sample_windows", "windows_metadata", "write_windows"]
