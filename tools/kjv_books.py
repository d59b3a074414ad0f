"""Rebuild bert_nb/data/kjv_books.json: the bundled corpus's books, and the verses in each chapter.

The corpus came from Debian's `bible-kjv` and `bible-kjv-text` (the `bible` program printing Gen1:1-Rev22:21, one
verse a line, references removed). This asks the same program for the references, checks that every verse's text is
the corpus line it stands for (up to runs of spaces, which the corpus joined), and writes the table.

    apt-get download bible-kjv bible-kjv-text && for d in bible-kjv*.deb; do dpkg-deb -x $d deb; done
    python tools/kjv_books.py deb
"""
import gzip, json, re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def main(deb: str):
    bible = [f'{deb}/usr/bin/bible', '-p', f'{deb}/usr/lib']
    # plain output heads each chapter with the book's name ("Song of Solomon 2"); -f prefixes each verse "Song2:1"
    heads = subprocess.run(bible + ['Gen1:1-Rev22:21'], capture_output=True, text=True, check=True).stdout
    names = list(dict.fromkeys(m[1] for m in re.finditer(r'^([1-3]? ?[A-Z][A-Za-z ]+) \d+$', heads, re.M)))
    verses = subprocess.run(bible + ['-f', 'Gen1:1-Rev22:21'], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    lines = gzip.open(ROOT / 'bert_nb' / 'data' / 'kjv_verses.txt.gz', 'rt', encoding='utf-8').read().splitlines()
    assert len(verses) == len(lines), (len(verses), len(lines))
    abbrevs, books = [], []
    for ref, line in zip(verses, lines):
        abbrev, c, v, text = re.fullmatch(r'(\S+?)(\d+):(\d+) (.*)', ref).groups()
        assert text.split() == line.split(), (ref, line)
        if not abbrevs or abbrevs[-1] != abbrev: abbrevs.append(abbrev); books.append([])
        if int(c) > len(books[-1]): books[-1].append(0)
        books[-1][-1] += 1
        assert (int(c), int(v)) == (len(books[-1]), books[-1][-1]), ref  # chapters and verses run 1, 2, ...
    assert len(names) == len(books) == 66, (len(names), len(books))
    out = ROOT / 'bert_nb' / 'data' / 'kjv_books.json'
    out.write_text(json.dumps([[n, b] for n, b in zip(names, books)], separators=(',', ':')))
    print(f"{out}: {len(books)} books, {sum(map(len, books))} chapters, {sum(map(sum, books))} verses")

if __name__ == '__main__': main(sys.argv[1])
