#!/bin/sh
# default_corpus.sh — installs the default corpus (Debian's Linux kernel documentation and fortunes) and prepares
# it with packmamba. Usage: dev/default_corpus.sh [OUT_DIR] [TOKENIZER]   (defaults: data/default, byte)
#   Needs root (or sudo) for apt-get the first time; the packages take ~230 MB (linux-doc-6.1) and ~3 MB (fortunes).
#   Documents: every .rst file of the kernel documentation (3,183 files, gzip'd; each one document) and every
#   fortune (short texts separated by lines holding "%", ~15,000 documents) — a long-tailed length distribution.
set -eu
OUT=${1:-data/default}
TOKENIZER=${2:-byte}
PACKMAMBA=${PACKMAMBA:-build/packmamba}
DOCS=/usr/share/doc/linux-doc-6.1/Documentation
FORTUNES=/usr/share/games/fortunes
if [ ! -d "$DOCS" ] || [ ! -d "$FORTUNES" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get install -y linux-doc-6.1 fortunes
fi
"$PACKMAMBA" prepare --out "$OUT" --tokenizer "$TOKENIZER" --ext rst "$DOCS" "$FORTUNES"
"$PACKMAMBA" stats "$OUT" --seq-len 2048 --batch 8
