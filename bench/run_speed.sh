# Shared by the whole-run benchmarks (bench/compare_builds.sh, bench/threads.sh); source it.
# median_speed METRICS.csv: the median tokens/s over steps 3.. (the first two warm up).
median_speed() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "tokens_per_s") c = i; next } $1 >= 3 { print $c }' "$1" |
    sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
# runs_bf16 STRATA DIR: whether bf16 products run here (one step of the tiny deck in bf16)
runs_bf16() {
  "$1" train inputs/bench-gpt-tiny.toml --set model.precision='"bf16"' --set run.steps=1 \
    --set run.out_dir="\"$2/probe\"" > /dev/null 2>&1
}
