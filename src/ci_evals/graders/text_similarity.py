"""``text_similarity``: OpenAI's reference-similarity grader with pinned, documented settings.

OpenAI names the metrics but never published how they are computed; these are our exact rules
(``input`` and ``reference`` are the rendered templates; score in [0, 1]; pass ⇔ score ≥
``pass_threshold``):

* ``fuzzy_match``: ``rapidfuzz.fuzz.WRatio(input, reference, processor=utils.default_process) / 100``.
* ``bleu``: ``nltk.translate.bleu_score.sentence_bleu([ref_tokens], input_tokens)``, BLEU-4,
  uniform weights, ``SmoothingFunction().method4``.
* ``gleu``: ``nltk.translate.gleu_score.sentence_gleu([ref_tokens], input_tokens)`` (n = 1..4).
* ``meteor``: ``nltk.translate.meteor_score.meteor_score([ref_tokens], input_tokens)`` with NLTK's
  defaults (alpha 0.9, beta 3, gamma 0.5, lowercasing, Porter stemmer, WordNet 3.0 synonyms).
* ``rouge_1`` … ``rouge_5``, ``rouge_l``: F1 of ``rouge_score.rouge_scorer.RougeScorer([type],
  use_stemmer=False)`` (``rougeL``, not ``rougeLsum``) with rouge-score's own tokenizer.
* ``cosine``: cosine similarity of the two embeddings from an OpenAI-compatible
  ``/v1/embeddings`` (``embedding_model``, default ``text-embedding-3-large``), floored at 0.

Tokens for bleu/gleu/meteor (``tokenizer: default``): ``re.findall(r"\\w+|[^\\w\\s]", text)``:
runs of Unicode letters/digits/underscore, and every other non-space character alone; case is
kept. It needs no downloaded data (``nltk.word_tokenize`` needs punkt).

``tokenizer: unicode`` (for non-Latin text; applies to bleu, gleu, meteor and rouge): lowercase,
drop punctuation and ``_``, keep runs of Unicode letters/digits, and make every character of a
script written without spaces (Han, Hiragana, Katakana, Thai, Lao, Myanmar, Khmer) a token of its
own. rouge-score's default tokenizer drops every character outside ``[a-z0-9]``, so identical
Japanese strings score 0 with it.

bleu, gleu, meteor and rouge_* need nltk and rouge-score, the ``text`` extra (``pip install
'ci-evals[text]'``; the Docker image has it): a suite using one without them fails validation
with one line naming it, before anything runs. fuzzy_match's rapidfuzz is in the core.

METEOR needs the WordNet corpus on NLTK's data path (``$NLTK_DATA`` or a default such as
``/usr/local/share/nltk_data``); nothing is downloaded at run time, and a suite using ``meteor``
without it fails validation with a message naming ``scripts/install-wordnet.sh``.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Context
from ci_evals.core.sample import GradeResult
from ci_evals.graders.string_check import DEFAULT_INPUT, PairGrader, PairSpec, error_grade
from ci_evals.llm.client import LLM
from ci_evals.llm.cost import Tally
from ci_evals.llm.errors import LLMError

Metric = Literal[
    "fuzzy_match",
    "bleu",
    "gleu",
    "meteor",
    "cosine",
    "rouge_1",
    "rouge_2",
    "rouge_3",
    "rouge_4",
    "rouge_5",
    "rouge_l",
]
TOKEN_METRICS = ("bleu", "gleu", "meteor")
ROUGE_TYPES = {f"rouge_{n}": f"rouge{n}" for n in range(1, 6)} | {"rouge_l": "rougeL"}
LIBRARIES = {
    "fuzzy_match": ("rapidfuzz",),
    "bleu": ("nltk",),
    "gleu": ("nltk",),
    "meteor": ("nltk",),
    **{m: ("rouge-score",) for m in ROUGE_TYPES},
    "cosine": (),
}
# The modules each metric imports, and their distributions (both in the ``text`` extra: rouge-score
# itself imports nltk's Porter stemmer).
TEXT_MODULES = {"nltk": "nltk", "rouge_score": "rouge-score"}
TEXT_EXTRA_HELP = (
    "evaluation_metric '{metric}' needs {dists}, which {verb} not installed: "
    "pip install 'ci-evals[text]' (the text extra: rouge-score and nltk)"
)
WORDNET_HELP = (
    "evaluation_metric 'meteor' needs the WordNet corpus, which NLTK cannot find "
    "(searched {paths}); install it with scripts/install-wordnet.sh (Debian packages "
    "wordnet-base + wordnet-sense-index copied to $NLTK_DATA/corpora/wordnet, default "
    "/usr/local/share/nltk_data), or run 'python -m nltk.downloader wordnet' on a machine "
    "with internet access"
)

_DEFAULT_TOKEN = re.compile(r"\w+|[^\w\s]")
_SPACELESS = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
)
_UNICODE_TOKEN = re.compile(rf"[{_SPACELESS}]|[^\W_{_SPACELESS}]+")


def default_tokens(text: str) -> list[str]:
    """bleu/gleu/meteor tokens: word runs and single punctuation characters, case kept."""
    return _DEFAULT_TOKEN.findall(text)


def unicode_tokens(text: str) -> list[str]:
    """``tokenizer: unicode``: lowercased word runs; spaceless-script characters one each."""
    return _UNICODE_TOKEN.findall(text.lower())


class UnicodeTokenizer:
    """rouge-score tokenizer object (``.tokenize(text)``) wrapping :func:`unicode_tokens`."""

    def tokenize(self, text: str) -> list[str]:
        return unicode_tokens(text)


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries behind text_similarity, for summary.json."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("nltk", "rouge-score", "rapidfuzz"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (validation stays cheap)."""
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None  # None too when sys.modules[module] is None
    except (ImportError, ValueError):
        return False


def text_extra_missing(metric: str) -> str | None:
    """None when ``metric`` needs nothing of the text extra or has it; otherwise the one line."""
    if metric not in TOKEN_METRICS and metric not in ROUGE_TYPES:
        return None
    missing = [dist for module, dist in TEXT_MODULES.items() if not _installed(module)]
    if not missing:
        return None
    return TEXT_EXTRA_HELP.format(
        metric=metric, dists=" and ".join(missing), verb="are" if len(missing) > 1 else "is"
    )


def wordnet_missing() -> str | None:
    """None when NLTK can find WordNet; otherwise the message saying how to install it."""
    import nltk

    try:
        nltk.data.find("corpora/wordnet/lexnames")
    except LookupError:
        return WORDNET_HELP.format(paths=", ".join(nltk.data.path))
    return None


_WORDNET_LOCK = threading.Lock()


def wordnet_version() -> str:
    """The WordNet version NLTK loads (loading takes a few seconds; one thread loads it)."""
    from nltk.corpus import wordnet

    with _WORDNET_LOCK:
        wordnet.ensure_loaded()
        return str(wordnet.get_version())


def cosine(a: list[float], b: list[float]) -> float:
    """Cosine similarity of two vectors (0 when either is all zeros)."""
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


class Scorer:
    """One metric with its settings, built on first use so imports stay lazy."""

    def __init__(self, metric: str, tokenizer: str) -> None:
        self.metric = metric
        self.tokenizer = tokenizer
        self._fn: Callable[[str, str], float] | None = None

    def tokens(self, text: str) -> list[str]:
        return unicode_tokens(text) if self.tokenizer == "unicode" else default_tokens(text)

    def _build(self) -> Callable[[str, str], float]:
        m = self.metric
        if m == "fuzzy_match":
            from rapidfuzz import fuzz, utils

            return lambda a, b: fuzz.WRatio(a, b, processor=utils.default_process) / 100.0
        if m == "bleu":
            from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

            smooth = SmoothingFunction().method4
            return lambda a, b: sentence_bleu(
                [self.tokens(b)], self.tokens(a), smoothing_function=smooth
            )
        if m == "gleu":
            from nltk.translate.gleu_score import sentence_gleu

            return lambda a, b: sentence_gleu([self.tokens(b)], self.tokens(a))
        if m == "meteor":
            from nltk.translate.meteor_score import meteor_score

            return lambda a, b: meteor_score([self.tokens(b)], self.tokens(a))
        from rouge_score.rouge_scorer import RougeScorer

        kind = ROUGE_TYPES[m]
        tok = UnicodeTokenizer() if self.tokenizer == "unicode" else None
        scorer = RougeScorer([kind], use_stemmer=False, tokenizer=tok)
        return lambda a, b: scorer.score(b, a)[kind].fmeasure

    def __call__(self, text: str, reference: str) -> float:
        """The score of ``text`` against ``reference`` (not for ``cosine``)."""
        if self._fn is None:
            self._fn = self._build()
        return float(self._fn(text, reference))


class TextSimilaritySpec(PairSpec):
    input: str = Field(default=DEFAULT_INPUT, description="Template of the text to score.")
    reference: str = Field(description="Template of the reference text.")
    evaluation_metric: Metric
    tokenizer: Literal["default", "unicode"] = Field(
        default="default",
        description="Tokens for bleu/gleu/meteor/rouge_*: 'unicode' for non-Latin text.",
    )
    embedding_model: str = Field(default="text-embedding-3-large", description="cosine only.")
    base_url: str | None = Field(
        default=None, description="cosine only: OpenAI-compatible endpoint."
    )
    api_key_env: str | None = Field(
        default=None, description="cosine only: env var holding the key."
    )


class TextSimilarityGrader(PairGrader[TextSimilaritySpec]):
    """Score the rendered ``input`` against ``reference`` with one pinned metric."""

    spec_model = TextSimilaritySpec

    def __init__(self, name: str, spec: TextSimilaritySpec, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        metric = spec.evaluation_metric
        set_fields = spec.model_fields_set
        if "tokenizer" in set_fields and metric not in TOKEN_METRICS and metric not in ROUGE_TYPES:
            raise ConfigError(
                f"tokenizer: not used by evaluation_metric '{metric}' (only bleu, gleu, meteor, rouge_*)"
            )
        cosine_only = {"embedding_model", "base_url", "api_key_env"} & set_fields
        if cosine_only and metric != "cosine":
            raise ConfigError(
                f"{sorted(cosine_only)[0]}: only used with evaluation_metric 'cosine'"
            )
        problem = text_extra_missing(metric)
        if problem:
            raise ConfigError(problem)
        if metric == "meteor":
            problem = wordnet_missing()
            if problem:
                raise ConfigError(problem)
        self.scorer = Scorer(metric, spec.tokenizer) if metric != "cosine" else None
        self.llm: LLM | None = None
        if metric == "cosine":
            self.llm = LLM(
                base_url=spec.base_url,
                api_key_env=spec.api_key_env,
                cache_dir=ctx.cache_dir,
                owner=f"graders.{name}",
                budget=ctx.budget,  # asked before every embeddings call, charged after each
                pricing=ctx.pricing,
            )
        self._versions: dict[str, str] = {}

    def versions(self) -> dict[str, str]:
        """Versions of what this grader's metric uses (libraries, and WordNet for meteor)."""
        libs = library_versions()
        out = {k: v for k, v in libs.items() if k in LIBRARIES[self.spec.evaluation_metric]}
        return out | self._versions

    def prepare(self) -> None:
        if self.llm is not None:
            self.llm.prepare()

    async def start(self) -> None:
        if self.spec.evaluation_metric == "meteor":
            # Load WordNet once, off the event loop, before samples arrive.
            self._versions["wordnet"] = await asyncio.to_thread(wordnet_version)
        elif self.llm is not None:
            await self.llm.start()

    async def aclose(self) -> None:
        if self.llm is not None:
            await self.llm.aclose()

    async def compare(self, text: str, reference: str) -> GradeResult:
        metric = self.spec.evaluation_metric
        meta: dict[str, Any] = {"metric": metric}
        if self.scorer is not None:
            try:
                score = self.scorer(text, reference)
            except Exception as exc:  # a library failing on one odd input fails that sample only
                return error_grade(f"{metric} failed: {type(exc).__name__}: {exc}", metric=metric)
        elif not text or not reference:
            score = (
                0.0  # nothing to embed (the endpoint rejects empty input); like the other metrics
            )
        else:
            tally = Tally()
            assert self.llm is not None  # cosine, the one metric without a scorer, has a client
            try:
                model = self.spec.embedding_model
                result = tally.add(
                    await self.llm.embed(model, [text, reference]), model, self.ctx.pricing
                )
                vectors = result.embeddings
                if len(vectors) != 2:
                    raise ValueError(f"expected 2 embeddings, got {len(vectors)}")
                score = cosine(vectors[0], vectors[1])
            except LLMError as exc:
                tally.add_error(exc)
                if exc.category:  # budget: the run's max_cost_usd stopped the call
                    meta["error_category"] = exc.category
                return error_grade(f"embeddings: {exc.message}", **meta, **tally.metadata())
            except (TypeError, ValueError, KeyError) as exc:
                return error_grade(
                    f"embeddings: malformed response ({exc})", metric=metric, **tally.metadata()
                )
            meta.update(tally.metadata())
        score = min(1.0, max(0.0, score))
        # Every field given: pydantic's validation (1.2-1.7 µs) is then cheaper than model_construct (2.4-4 µs).
        return GradeResult(
            score=score, rationale=f"{metric} = {score:.4f}", metadata=meta, error=None
        )
