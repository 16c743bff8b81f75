#!/usr/bin/env python3
"""`baton data prepare` against the Python sentencepiece package, one core each (issue 34).

Builds a text corpus of at least --mb MB from the machine's own documentation (the
copyright files and the gzipped changelogs and docs under /usr/share/doc; nothing is
downloaded), takes a SentencePiece model (--model, or one `baton data prepare --vocab 8000`
trains on the corpus, not timed), then times, each pinned to one core (taskset) and best
of --rounds:
  - `baton data prepare --tokenizer MODEL --doc-per-line`: read, tokenize, write .bin/.idx;
  - the Python package encoding the same lines, one call per line, one thread; and
    encoding them as one list with num_threads=1 (its batch path);
and prints MB/s of text for each, the ratios, and the load average.

Usage: python3 bench/data_prepare.py [--baton build/baton] [--mb 8] [--model M] [--cpu 0]
"""
import argparse, glob, gzip, os, subprocess, sys, tempfile, time


def build_corpus(path, megabytes):
    """Text files of /usr/share/doc, decompressed, until `megabytes` MB; returns the size."""
    files = sorted(glob.glob("/usr/share/doc/*/copyright")) + sorted(
        glob.glob("/usr/share/doc/**/*.gz", recursive=True))
    size = 0
    with open(path, "wb") as out:
        for name in files:
            try:
                data = gzip.open(name).read() if name.endswith(".gz") else open(name, "rb").read()
                data.decode("utf-8")
            except (OSError, UnicodeDecodeError, EOFError):
                continue
            out.write(data)
            size += len(data)
            if size >= megabytes * 1e6:
                return size
    sys.exit(f"only {size / 1e6:.1f} MB of text under /usr/share/doc, fewer than {megabytes}")


def best_of(rounds, run):
    return min(run() for _ in range(rounds))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baton", default="build/baton")
    parser.add_argument("--mb", type=float, default=8)
    parser.add_argument("--model", help="a SentencePiece .model (default: trained on the corpus)")
    parser.add_argument("--cpu", type=int, default=0, help="the core both run on")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import sentencepiece
    one_core = ["taskset", "-c", str(args.cpu)]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        size = build_corpus(corpus, args.mb)
        model = args.model
        if model is None:
            subprocess.run([args.baton, "data", "prepare", "--input", corpus, "--doc-per-line",
                            "--vocab", "8000", "--output", os.path.join(tmp, "trained")],
                           check=True, capture_output=True)
            model = os.path.join(tmp, "trained.model")

        def baton():
            start = time.perf_counter()
            subprocess.run(one_core + [args.baton, "data", "prepare", "--input", corpus,
                                       "--doc-per-line", "--tokenizer", model, "--output",
                                       os.path.join(tmp, "out")], check=True,
                           capture_output=True)
            return time.perf_counter() - start

        os.sched_setaffinity(0, {args.cpu})
        processor = sentencepiece.SentencePieceProcessor(model_file=model)
        lines = [line for line in open(corpus, encoding="utf-8").read().split("\n") if line]

        def python_lines():
            start = time.perf_counter()
            for line in lines:
                processor.encode(line)
            return time.perf_counter() - start

        def python_list():
            start = time.perf_counter()
            processor.encode(lines, num_threads=1)
            return time.perf_counter() - start

        baton_s = best_of(args.rounds, baton)
        line_s = best_of(args.rounds, python_lines)
        list_s = best_of(args.rounds, python_list)
    rate = lambda seconds: size / seconds / 1e6
    print(f"corpus: {size / 1e6:.1f} MB, {len(lines)} lines from /usr/share/doc; model "
          f"{'given' if args.model else 'trained by baton, vocabulary 8000'}; core {args.cpu}; "
          f"best of {args.rounds}")
    print(f"baton data prepare --tokenizer (read, encode, write): {baton_s:.2f} s, "
          f"{rate(baton_s):.2f} MB/s")
    print(f"python sentencepiece {sentencepiece.__version__}, encode per line: {line_s:.2f} s, "
          f"{rate(line_s):.2f} MB/s")
    print(f"python sentencepiece {sentencepiece.__version__}, encode(list, num_threads=1): "
          f"{list_s:.2f} s, {rate(list_s):.2f} MB/s")
    print(f"ratio baton / python: {line_s / baton_s:.2f} (per line), "
          f"{list_s / baton_s:.2f} (list)")
    print(f"load average: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
