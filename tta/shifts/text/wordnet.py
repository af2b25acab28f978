"""Locating and loading WordNet 3.0 offline (docs/shifts/text.md: code vs paper, "WordNet").

The database comes from the Debian packages ``wordnet-base`` (the dictionary files under ``/usr/share/wordnet``)
and ``wordnet-sense-index`` (``index.sense``), read with nltk's :class:`WordNetCorpusReader` — no
``nltk.download``. The Debian package lacks the ``lexnames`` file that nltk's reader needs; it is the fixed list of
the 45 lexicographer files of WordNet 3.0 (``lexnames(5WN)``), which :class:`DebianWordNetReader` serves from
memory. Search order: ``$WNSEARCHDIR`` (WordNet's own variable), the Debian/Homebrew locations, then an nltk data
directory ``corpora/wordnet``. ``make setup`` installs the packages when it runs as root.
"""

from __future__ import annotations

import io
import logging
import os
import warnings
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

DEBIAN_PACKAGES = ("wordnet-base", "wordnet-sense-index")
SEARCH_DIRS = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/opt/homebrew/share/wordnet", "/usr/share/wordnet/dict")
REQUIRED_FILES = ("data.noun", "data.verb", "data.adj", "data.adv", "index.noun", "index.verb", "index.adj",
                  "index.adv", "noun.exc", "verb.exc", "adj.exc", "adv.exc")

# lexnames(5WN): file number = line number; syntactic category 1 noun, 2 verb, 3 adjective, 4 adverb
_LEXFILES = ("adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
             "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
             "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
             "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
             "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
             "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather "
             "adj.ppl").split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
LEXNAMES = "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(_LEXFILES))


class WordNetMissingError(FileNotFoundError):
    """WordNet's database files could not be found."""


def _complete(path: Path) -> bool:
    return all((path / f).is_file() for f in REQUIRED_FILES)


def find_wordnet_dir() -> Path:
    """The directory holding WordNet 3.0's database files.

    Raises:
        WordNetMissingError: naming the Debian packages to install (or ``WNSEARCHDIR`` to set).
    """
    candidates = []
    if os.environ.get("WNSEARCHDIR"):
        candidates.append(Path(os.environ["WNSEARCHDIR"]))
    candidates += [Path(p) for p in SEARCH_DIRS]
    try:
        import nltk

        for root in nltk.data.path:
            candidates.append(Path(root) / "corpora" / "wordnet")
    except ImportError:
        pass
    for path in candidates:
        if _complete(path):
            return path
    raise WordNetMissingError(
        "WordNet 3.0 was not found (looked in $WNSEARCHDIR, " + ", ".join(SEARCH_DIRS) + " and nltk's corpora/wordnet). "
        f"Install the Debian packages {' and '.join(DEBIAN_PACKAGES)}: "
        f"sudo apt-get install -y {' '.join(DEBIAN_PACKAGES)} (or run `make setup` as root), "
        "or point WNSEARCHDIR at a WordNet 3.0 dict directory."
    )


def _reader_class():
    try:
        from nltk.corpus.reader.wordnet import WordNetCorpusReader
    except ImportError as e:
        raise ImportError("the text shifts read WordNet with nltk, from the 'text' extra: pip install -e '.[text]'") from e

    class DebianWordNetReader(WordNetCorpusReader):
        """nltk's WordNet reader over a Debian dict directory; ``lexnames`` comes from memory when absent."""

        def open(self, file):  # noqa: A003  (nltk's name)
            if file == "lexnames" and not (Path(str(self._root)) / "lexnames").is_file():
                return io.StringIO(LEXNAMES)
            return super().open(file)

        def map_wn(self, version="wordnet"):
            return None  # the OMW mapping onto nltk's own download; no multilingual data is used here

    return DebianWordNetReader


@lru_cache(maxsize=1)
def wordnet():
    """The process-wide WordNet reader (nltk's ``WordNetCorpusReader`` API: ``synsets``, ``morphy``, ...)."""
    path = find_wordnet_dir()
    if not (path / "index.sense").is_file():
        log.warning("%s has no index.sense (Debian package wordnet-sense-index); sense-key lookups are unavailable",
                    path)
    import nltk.data

    if str(path) not in nltk.data.path:  # nltk ≥ 3.9 reads only under authorised roots (its data path)
        nltk.data.path.append(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available" (no OMW, not needed)
        reader = _reader_class()(str(path), None)
    log.info("WordNet %s loaded from %s", reader.get_version(), path)
    return reader
