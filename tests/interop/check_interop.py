"""Issue 34's interop checks between baton and the Python side of the field.

(a) A dataset written by megatron-core's IndexedDatasetBuilder is read by
    baton (`baton data inspect --print-tokens`) token for token.
(b) Datasets baton writes (`baton data prepare`) are read by megatron-core's
    IndexedDataset, documents and all.
(c) A SentencePiece model baton trains encodes the same ids as the Python
    sentencepiece package. Its version matters: from 0.2.2 on it breaks ties
    between segmentations of runs of one character ("w" "ww" or "ww" "w")
    otherwise than the C++ library Debian ships (0.1.97) and the package up
    to 0.2.1; tests/cli/data_interop.sh installs 0.2.1.

usage: check_interop.py BATON TMPDIR
Needs numpy, torch, sentencepiece and megatron-core's source (see
megatron_indexed_dataset.py); tests/cli/data_interop.sh provides them.
Prints "N passed, 0 failed", or exits 1 naming the first difference.
"""

import json
import os
import random
import subprocess
import sys

import numpy
import sentencepiece
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_indexed_dataset  # noqa: E402

TEXTS = ["/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0"]


def baton_documents(baton, prefix):
    """The documents of PREFIX as baton reads them: lists of ids."""
    out = subprocess.run([baton, "data", "inspect", "--data", prefix, "--print-tokens"],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    return [[int(t) for t in line.split()] for line in out[1:-1]]


def megatron_documents(indexed, prefix):
    """The documents of PREFIX as megatron-core's IndexedDataset reads them."""
    dataset = indexed.IndexedDataset(prefix)
    bounds = dataset.document_indices
    assert bounds[0] == 0 and bounds[-1] == len(dataset), (bounds, len(dataset))
    return [numpy.concatenate([dataset[s] for s in range(bounds[d], bounds[d + 1])]
                              or [numpy.zeros(0, dataset.index.dtype)]).tolist()
            for d in range(len(bounds) - 1)]


def check(what, got, expected):
    if got != expected:
        first = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e),
                     min(len(got), len(expected)))
        sys.exit(f"FAIL: {what}: differ first at document {first} "
                 f"({len(got)} documents against {len(expected)})")
    print(f"ok: {what} ({len(got)} documents)")


def megatron_writes_baton_reads(baton, tmp, indexed):
    rng = random.Random(34)
    for dtype, high in ((numpy.uint16, 65535), (numpy.int32, 2**31 - 1), (numpy.uint8, 255)):
        prefix = os.path.join(tmp, f"megatron_{dtype.__name__}")
        builder = indexed.IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
        documents = []
        for d in range(200):
            ids = [rng.randint(0, high) for _ in range(rng.randint(1, 300))]
            if d % 3 == 0:  # a document of several sequences, as --split-sentences writes
                cut = rng.randint(0, len(ids))
                builder.add_item(torch.tensor(ids[:cut], dtype=torch.int64))
                builder.add_item(torch.tensor(ids[cut:], dtype=torch.int64))
                builder.end_document()
            else:
                builder.add_document(torch.tensor(ids, dtype=torch.int64), [len(ids)])
            documents.append(ids)
        builder.finalize(prefix + ".idx")
        check(f"(a) megatron-core {dtype.__name__} read by baton",
              baton_documents(baton, prefix), documents)


def baton_writes_megatron_reads(baton, tmp, indexed):
    prefix = os.path.join(tmp, "baton_bytes")
    subprocess.run([baton, "data", "prepare", "--byte-level", "--output", prefix]
                   + [a for t in TEXTS for a in ("--input", t)], check=True, capture_output=True)
    expected = [list(open(t, "rb").read()) + [256] for t in TEXTS]
    check("(b) baton byte-level read by megatron-core", megatron_documents(indexed, prefix),
          expected)
    return expected


def sentencepiece_agrees(baton, tmp, indexed):
    lines = [line for t in TEXTS for line in open(t, encoding="utf-8").read().split("\n")]
    jsonl = os.path.join(tmp, "docs.jsonl")
    with open(jsonl, "w", encoding="utf-8") as out:
        for i in range(0, len(lines), 7):  # documents of 7 lines, newlines inside
            out.write(json.dumps({"text": "\n".join(lines[i:i + 7])}) + "\n")
    prefix = os.path.join(tmp, "baton_sp")
    run = subprocess.run([baton, "data", "prepare", "--vocab", "1000", "--input", jsonl,
                          "--output", prefix], capture_output=True, text=True)
    if run.returncode == 2 and "built without SentencePiece" in run.stderr:
        print("skipped: (c) this baton was built without SentencePiece")
        return False
    if run.returncode != 0:
        sys.exit(f"FAIL: (c) baton data prepare --vocab 1000: exit {run.returncode}: {run.stderr}")
    processor = sentencepiece.SentencePieceProcessor(model_file=prefix + ".model")
    texts = [json.loads(line)["text"] for line in open(jsonl, encoding="utf-8")]
    texts = [t for t in texts if t]
    expected = [processor.encode(t) + [processor.eos_id()] for t in texts]
    check("(c) baton's SentencePiece model: Python sentencepiece ids as baton wrote",
          megatron_documents(indexed, prefix), expected)
    check("(c) the same, read by baton", baton_documents(baton, prefix), expected)
    if processor.decode(expected[3][:-1]) != texts[3]:
        sys.exit("FAIL: (c) decoding does not give the document back")
    return True


def main():
    baton, tmp = sys.argv[1], sys.argv[2]
    indexed = megatron_indexed_dataset.load()
    megatron_writes_baton_reads(baton, tmp, indexed)
    baton_writes_megatron_reads(baton, tmp, indexed)
    passed = 3 if sentencepiece_agrees(baton, tmp, indexed) else 2
    print(f"{passed} passed, 0 failed (torch {torch.__version__}, numpy {numpy.__version__}, "
          f"sentencepiece {sentencepiece.__version__})")


if __name__ == "__main__":
    main()
