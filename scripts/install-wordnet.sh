#!/usr/bin/env bash
# Install WordNet 3.0 for NLTK's METEOR without a runtime download.
#
# NLTK's downloader needs network access to its own data host, which CI does not have, and the
# PyPI "nltk data" packages are empty. Debian ships WordNet 3.0 as wordnet-base +
# wordnet-sense-index; this script copies those files into an NLTK data folder in the layout NLTK
# reads (corpora/wordnet/) and adds the 45-line `lexnames` table that no Debian package ships.
#
# Target folder: the first entry of $NLTK_DATA if set, else /usr/local/share/nltk_data (on NLTK's
# default search path, so no environment variable is needed afterwards); non-root users without
# sudo get ~/nltk_data (also on the default path). Files are copied, not symlinked: NLTK 3.10's
# path checks reject links that leave the data root. Safe to run again (does nothing if present).
set -euo pipefail

if [[ -n "${NLTK_DATA:-}" ]]; then
  dest="${NLTK_DATA%%:*}"
elif [[ $(id -u) -eq 0 || -w /usr/local/share ]]; then
  dest=/usr/local/share/nltk_data
else
  dest="$HOME/nltk_data"
fi
wn="$dest/corpora/wordnet"

if [[ -f "$wn/lexnames" && -f "$wn/data.noun" && -f "$wn/index.sense" ]]; then
  echo "install-wordnet: WordNet already in $wn"
  exit 0
fi

src=/usr/share/wordnet
if [[ ! -f "$src/data.noun" || ! -f "$src/index.sense" ]]; then
  bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" wordnet-base wordnet-sense-index
fi

mkdir -p "$wn"
cp "$src"/data.* "$src"/index.* "$src"/*.exc "$src"/cntlist.rev "$src"/sents.vrb "$src"/sentidx.vrb "$wn"/

# The lexicographer-file table (WordNet 3.0 `lexnames`): number, name, syntactic category.
printf '%s\t%s\t%s\n' \
  00 adj.all 3  01 adj.pert 3  02 adv.all 4  03 noun.Tops 1  04 noun.act 1 \
  05 noun.animal 1  06 noun.artifact 1  07 noun.attribute 1  08 noun.body 1 \
  09 noun.cognition 1  10 noun.communication 1  11 noun.event 1  12 noun.feeling 1 \
  13 noun.food 1  14 noun.group 1  15 noun.location 1  16 noun.motive 1 \
  17 noun.object 1  18 noun.person 1  19 noun.phenomenon 1  20 noun.plant 1 \
  21 noun.possession 1  22 noun.process 1  23 noun.quantity 1  24 noun.relation 1 \
  25 noun.shape 1  26 noun.state 1  27 noun.substance 1  28 noun.time 1 \
  29 verb.body 2  30 verb.change 2  31 verb.cognition 2  32 verb.communication 2 \
  33 verb.competition 2  34 verb.consumption 2  35 verb.contact 2  36 verb.creation 2 \
  37 verb.emotion 2  38 verb.motion 2  39 verb.perception 2  40 verb.possession 2 \
  41 verb.social 2  42 verb.stative 2  43 verb.weather 2  44 adj.ppl 3 \
  > "$wn/lexnames"

echo "install-wordnet: WordNet 3.0 installed in $wn ($(wc -l < "$wn/lexnames") lexnames)"
