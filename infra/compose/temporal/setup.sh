#!/bin/sh
# Registers the search attributes every golem tick sets (infra/temporal.py SEARCH_ATTRIBUTES); safe to re-run.
set -eu
ns="${TEMPORAL_NAMESPACE:-default}"
until temporal operator namespace describe --namespace "$ns" >/dev/null 2>&1; do sleep 2; done
for attr in GolemId:Keyword Tick:Int Tier:Keyword Regime:Keyword Phase:Keyword; do
  name="${attr%%:*}"; type="${attr##*:}"
  temporal operator search-attribute create --namespace "$ns" --name "$name" --type "$type" >/dev/null 2>&1 || true
done
temporal operator search-attribute list --namespace "$ns"
