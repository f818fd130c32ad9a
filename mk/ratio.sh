#!/bin/sh
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# ratio.sh KEY BASE FILE [UNIT]: for every unit (or only UNIT) of every
# benchmark in FILE (go test -bench output), the median of each value of the sub-benchmark key KEY
# (e.g. impl in Pipeline/spans=1000/impl=ours) divided by the median of
# KEY=BASE: the "N x" figures the READMEs quote. benchstat prints the same
# comparison as a percentage with its confidence interval.
key=$1 base=$2 file=$3 only=${4:-}
awk -v key="$key" -v base="$base" -v only="$only" '
/^Benchmark/ {
  name = $1; sub(/-[0-9]+$/, "", name)
  val = ""; n = split(name, parts, "/"); group = ""
  for (i = 1; i <= n; i++) {
    if (index(parts[i], key "=") == 1) val = substr(parts[i], length(key) + 2)
    else group = group (group == "" ? "" : "/") parts[i]
  }
  if (val == "") next
  for (i = 3; i + 1 <= NF; i += 2) {
    u = $(i + 1); if (only != "" && u != only) continue
    k = group SUBSEP u SUBSEP val
    cnt[k]++; v[k, cnt[k]] = $i
    if (!((group, u) in seen)) { seen[group, u] = 1; order[++no] = group SUBSEP u }
    if (!((group, u, val) in seenv)) { seenv[group, u, val] = 1; vals[group, u] = vals[group, u] " " val }
  }
}
function median(k,   m, i, j, t, a) {
  m = cnt[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
  for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
  for (o = 1; o <= no; o++) {
    split(order[o], gu, SUBSEP); g = gu[1]; u = gu[2]
    bk = g SUBSEP u SUBSEP base
    if (!(bk in cnt)) continue
    b = median(bk); if (b == 0) continue
    nv = split(vals[g, u], vs, " ")
    for (i = 1; i <= nv; i++) {
      if (vs[i] == base) continue
      k = g SUBSEP u SUBSEP vs[i]
      printf "%s %s: %s / %s = %.2fx (medians of %d and %d)\n", g, u, vs[i], base, median(k) / b, cnt[k], cnt[bk]
    }
  }
}' "$file"
