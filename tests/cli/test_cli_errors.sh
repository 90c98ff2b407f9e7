#!/usr/bin/env bash
# Bad input gets one line naming the cause on stderr (printed once, by rank 0), exit code
# 2, and no hang. Usage: test_cli_errors.sh STRATA MPIEXEC
set -u
strata=$1
mpiexec=$2
deck_doc=$(cd "$(dirname "$0")/../.." && pwd)/docs/deck.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
failures=0

good='[run]
steps = 2
log_every = 1
[model]
n_layer = 1
n_embd = 16
n_head = 2
seq_len = 8
[data]
kind = "random"
batch_size = 4
'
printf '%s' "$good" > good.toml
resnet='[run]
steps = 2
[model]
kind = "resnet"
steps = 8
width = 8
[data]
kind = "images"
batch_size = 4
[parallel]
pipeline = 2
schedule = "mgrit"
[layerpar]
levels = 2
cfactor = 2
'
printf '%s' "$resnet" > resnet.toml
softmax='[run]
steps = 2
[model]
kind = "softmax"
[data]
kind = "images"
batch_size = 4
'
printf '%s' "$softmax" > softmax.toml
printf 'not an IDX file' | gzip > train-images-idx3-ubyte.gz
printf 'x' > train-labels-idx1-ubyte

# expect NPROCS EXPECTED_MESSAGE_PART -- strata args...
expect() {
  local np=$1 want=$2
  shift 3
  local out rc lines
  out=$(timeout -k 10 60 "$mpiexec" -n "$np" "$strata" "$@" 2>&1 >/dev/null)
  rc=$?
  lines=$(printf '%s\n' "$out" | grep -c 'strata: error')
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! printf '%s' "$out" | grep -qF -- "$want"; then
    echo "FAIL: strata $* (np=$np): exit $rc, $lines error lines, wanted '$want'; got:"
    printf '%s\n' "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok: $want"
  fi
}

# The command line itself: --help is strata's (Kokkos' options behind --kokkos-help), no
# subcommand is a usage error (exit 2), --version names the commit and the build.
check() {  # description, then a shell condition
  if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
for cmd in "" train plan calibrate deck inspect generate; do
  help=$("$strata" $cmd --help 2>&1); rc=$?
  check "strata $cmd --help: exit 0, strata's usage only, one line pointing to --kokkos-help" \
    '[ $rc -eq 0 ] && printf "%s" "$help" | grep -q "^Usage: " && ! printf "%s" "$help" | grep -q "Kokkos command line arguments" && printf "%s" "$help" | grep -q "strata --kokkos-help lists them"'
done
kh=$("$strata" --kokkos-help 2>&1); rc=$?
check "strata --kokkos-help: exit 0, Kokkos' options" '[ $rc -eq 0 ] && printf "%s" "$kh" | grep -q -- "--kokkos-threads"'
"$strata" >/dev/null 2>noargs.err; rc=$?
check "strata without a subcommand: exit 2, 'A subcommand is required'" '[ $rc -eq 2 ] && grep -q "A subcommand is required" noargs.err'
v=$("$strata" --version 2>&1); rc=$?
check "strata --version: $v" '[ $rc -eq 0 ] && printf "%s" "$v" | grep -qE "^strata [0-9]+\.[0-9]+\.[0-9]+ \(git [0-9a-f]{12}(-dirty)?; (CPU|CUDA) build.*Kokkos [0-9.]+ "'

printf '[model]\nn_layers = 2\n' > unknown.toml
printf '[run\nsteps = 2\n' > malformed.toml
printf '[model]\nn_layer = "two"\n' > wrongtype.toml
printf '%s[data]\n' "$good" | sed 's/kind = "random"/kind = "text"\nfiles = ["\/nonexistent\/*.txt"]/' > missing_data.toml

# a rank's threads: one line before anything starts, on every rank alike
expect 2 "--threads wants a whole number of threads >= 1, got '0'" -- train nope.toml --threads 0
expect 1 "--threads wants a whole number of threads >= 1, got 'two'" -- --threads=two train nope.toml
expect 1 "--threads wants a number of threads" -- train nope.toml --threads
OMP_NUM_THREADS=many expect 1 "OMP_NUM_THREADS wants a whole number of threads >= 1, got 'many'" -- train nope.toml
expect 1 "set a rank's threads with --threads N (Kokkos, OpenBLAS and oneDNN alike), not --kokkos-threads=2" -- train nope.toml --kokkos-threads=2
expect 1 "cannot open deck 'nope.toml': No such file or directory" -- train nope.toml
# decks that cannot crash or hang strata: refused before the parser (and before any
# collective), on every rank alike, with the file and the cause
mkfifo fifo.toml
mkdir dir.toml
head -c 1100000 /dev/zero | tr '\0' '#' > huge.toml  # 1.05 MB of comment: over the 1 MiB bound
python3 -c "print('a = ' + '[' * 200000 + ']' * 200000)" > nested.toml
python3 -c "print('[run]'); print('a' + '.a' * 200000 + ' = 1')" > dotted.toml
printf '%s' "$good" | sed 's/^steps = 2$/steps = 2\ncheckpoint_every = 18446744073709551616/' > big_int.toml
expect 2 "deck '/dev/zero' is a character device, not a regular file" -- train /dev/zero
expect 2 "deck 'dir.toml' is a directory, not a regular file" -- train dir.toml --set parallel.data=2
expect 2 "deck 'fifo.toml' is a FIFO, not a regular file" -- train fifo.toml --set parallel.data=2
expect 2 "deck 'huge.toml' is larger than a deck can be (1100000 bytes; at most 1048576)" -- train huge.toml --set parallel.data=2
expect 2 "nested.toml:1: not valid TOML: nested more than 64 levels deep" -- train nested.toml --set parallel.data=2
expect 1 "dotted.toml:2: not valid TOML: nested more than 64 levels deep" -- deck dotted.toml
expect 1 "--set a.b:1: not valid TOML: nested more than 64 levels deep" -- deck good.toml --set "a.b=$(printf '[%.0s' $(seq 100))1$(printf ']%.0s' $(seq 100))"
expect 2 "big_int.toml: run.checkpoint_every must be an integer that fits in 64 bits, got 18446744073709551616" -- train big_int.toml --set parallel.data=2
expect 1 "run.seed must be an integer that fits in 64 bits, got -9223372036854775809" -- deck good.toml --set run.seed=-9223372036854775809
expect 1 "model.n_layer must be an integer that fits in 64 bits, got 0x1_0000_0000_0000_0000" -- deck good.toml --set model.n_layer=0x1_0000_0000_0000_0000
printf "[run]\nname = 'caf\\xe9'\n" > latin1.toml  # Latin-1, not UTF-8: toml11 read past its buffer on such
expect 2 "latin1.toml:2: not valid TOML: not UTF-8 (byte 0xe9)" -- train latin1.toml --set parallel.data=2
# a read that fails (EIO: /proc/self/mem reads address 0, which no process maps)
expect 2 "cannot read deck '/proc/self/mem': Input/output error" -- train /proc/self/mem --set parallel.data=2
expect 2 "malformed.toml:1: not valid TOML" -- train malformed.toml
expect 2 "unknown.toml: unknown key 'model.n_layers'" -- train unknown.toml
expect 1 "wrongtype.toml: model.n_layer must be an integer" -- train wrongtype.toml
expect 2 "parallel layout data x pipeline x context x tensor_rows x tensor_cols = 1 x 1 x 1 x 1 x 1 = 1 ranks, but the job has 2 (use mpirun -n 1 or --set parallel.data=2)" -- train good.toml
expect 2 'parallel.sequence_parallel applies to tensor_mode = "1d" with tensor_cols > 1: the 2D split keeps every activation in (batch / q) x (C / q) blocks already, with no region replicated over the tensor group to split' -- train good.toml --set parallel.sequence_parallel=true --set parallel.tensor_mode=2d --set parallel.data=1 --set parallel.tensor_rows=1 --set parallel.tensor_cols=1
expect 2 'parallel.sequence_parallel applies to tensor_mode = "1d" with tensor_cols > 1: without a tensor split no region is replicated' -- train good.toml --set parallel.sequence_parallel=true --set parallel.data=2
expect 2 'parallel.sequence_parallel does not run with schedule = "zb-h1": a block' -- train good.toml --set parallel.sequence_parallel=true --set parallel.tensor_cols=2 --set parallel.pipeline=2 --set parallel.schedule=zb-h1 --set model.n_layer=2 --set parallel.data=1 --set parallel.micro_batches=2
expect 2 'the heads a tensor rank holds (model.n_head / tensor_cols = 2) must be divisible by parallel.context (4) for context_mode = "all-to-all"' -- train good.toml --set parallel.context=4 --set parallel.context_mode=all-to-all --set parallel.data=1
# the 3D (AxoNN) split: its own keys, its group sizes against the widths and the ranks
expect 2 'parallel.tensor_x = 2 has no effect in this deck: it needs parallel.tensor_mode = "3d"' -- train good.toml --set parallel.tensor_x=2 --set parallel.data=1
expect 2 'parallel.tensor_overlap = false has no effect in this deck: it needs parallel.tensor_mode = "3d"' -- train good.toml --set parallel.tensor_overlap=false
# a key without effect in the deck's layout is refused, naming what it needs (every key: tests/core/test_deck_key_effect.cpp)
expect 2 'parallel.schedule = "xpipe" has no effect in this deck: it needs parallel.pipeline > 1 (pipeline stages)' -- train good.toml --set parallel.schedule=xpipe --set parallel.zero=3 --set parallel.data=2
expect 2 'parallel.tensor_rows and tensor_cols must be 1 for tensor_mode = "3d" (got 1 x 2; its groups are tensor_x, tensor_y and tensor_depth)' -- train good.toml --set parallel.tensor_mode=3d --set parallel.tensor_cols=2 --set parallel.data=1
expect 2 'model.n_head (1) must be divisible by parallel.tensor_y (2)' -- train good.toml --set parallel.tensor_mode=3d --set parallel.tensor_y=2 --set model.n_head=1 --set parallel.data=1
expect 2 'parallel layout data x pipeline x context x tensor_x x tensor_y x tensor_depth = 1 x 1 x 1 x 2 x 2 x 1 = 4 ranks, but the job has 2 (use mpirun -n 4)' -- train good.toml --set parallel.tensor_mode=3d --set parallel.tensor_x=2 --set parallel.tensor_y=2 --set parallel.data=1
expect 2 'parallel.sequence_parallel applies to tensor_mode = "1d" with tensor_cols > 1: the 3D split keeps the residual stream in (batch / depth) x (C / x) blocks already' -- train good.toml --set parallel.sequence_parallel=true --set parallel.tensor_mode=3d --set parallel.tensor_depth=2 --set parallel.data=1
expect 2 'model.moe_experts (3) must be divisible by parallel.expert x tensor_x x tensor_y x tensor_depth (under a 3D split the tensor ranks are expert ranks too) (2)' -- train good.toml --set model.moe_experts=3 --set model.moe_top_k=1 --set parallel.tensor_mode=3d --set parallel.tensor_depth=2 --set parallel.data=1
expect 2 'parallel.zero = 2 does not run with schedule = "mgrit" yet' -- train resnet.toml --set parallel.zero=2
expect 2 'parallel.zero = 2 does not run with schedule = "xpipe"' -- train good.toml --set parallel.zero=2 --set parallel.pipeline=2 --set parallel.schedule=xpipe --set parallel.data=1 --set model.n_layer=2
expect 2 'parallel.zero = 3 runs model.kind = "gpt" only: the softmax regression' -- train softmax.toml --set parallel.zero=3
expect 2 'parallel.zero_keep_params applies to zero = 3, whose passes gather the parameters; this deck has zero = 2' -- train good.toml --set parallel.zero=2 --set parallel.zero_keep_params=true
expect 2 'parallel.zero_prefetch applies to zero = 3, whose passes gather the parameters; this deck has zero = 0' -- train good.toml --set parallel.zero_prefetch=2
# the replicas' sums node by node: not with ZeRO yet, as many replicas on every node (the
# ranks taken as nodes of STRATA_RANKS_PER_NODE), the variable itself a number
expect 2 'parallel.grad_sum = "nodes" does not run with zero = 1 yet' -- train good.toml --set parallel.data=2 --set parallel.zero=1 --set parallel.grad_sum=nodes
STRATA_RANKS_PER_NODE=2 expect 3 'parallel.grad_sum = "nodes" needs as many data replicas on every node, but the nodes hold 1 to 2' -- train good.toml --set parallel.data=3 --set data.batch_size=6 --set parallel.grad_sum=nodes
STRATA_RANKS_PER_NODE=zero expect 2 "STRATA_RANKS_PER_NODE must be a whole number of ranks of at least 1, not 'zero'" -- train good.toml --set parallel.data=2
# ... compressed: a known codec, PowerSGD's rank at least 1 and only where PowerSGD runs
expect 2 'parallel.grad_compression must be "none", "int8" or "powersgd" (got "int4")' -- train good.toml --set parallel.grad_sum=nodes --set parallel.grad_compression=int4
expect 2 'parallel.powersgd_rank must be >= 1' -- train good.toml --set parallel.grad_sum=nodes --set parallel.grad_compression=powersgd --set parallel.powersgd_rank=0
expect 2 'parallel.powersgd_rank = 2 has no effect in this deck: it needs parallel.grad_compression = "powersgd"' -- train good.toml --set parallel.grad_sum=nodes --set parallel.grad_compression=int8 --set parallel.powersgd_rank=2
# mixtures of experts: the rules of model.moe_* and parallel.expert
expect 2 'parallel.expert = 2 splits the experts of a mixture-of-experts model, but model.moe_experts is 0 (a dense model)' -- train good.toml --set parallel.expert=2 --set parallel.data=2
expect 2 'parallel.data (2) must be divisible by parallel.expert (the expert ranks are taken from the data group) (4)' -- train good.toml --set model.moe_experts=4 --set parallel.expert=4 --set parallel.data=2
expect 2 'model.moe_experts (6) must be divisible by parallel.expert (each expert rank holds as many experts) (4)' -- train good.toml --set model.moe_experts=6 --set parallel.expert=4 --set parallel.data=4
expect 2 'model.moe_top_k (2) must be at most model.moe_experts (1)' -- train good.toml --set model.moe_experts=1
expect 2 'model.moe_experts does not run with tensor_mode = "2d"' -- train good.toml --set model.moe_experts=4 --set parallel.tensor_mode=2d --set parallel.tensor_rows=2 --set parallel.tensor_cols=2 --set parallel.data=1
expect 2 'model.moe_experts (2) must be divisible by parallel.expert x parallel.tensor_cols (under a 1D split the tensor ranks are expert ranks too) (4)' -- train good.toml --set model.moe_experts=2 --set parallel.expert=2 --set parallel.tensor_cols=2 --set parallel.data=2
expect 2 'model.moe_top_k must be in [1, 2]' -- train good.toml --set model.moe_experts=4 --set model.moe_top_k=3
expect 2 "model.seq_len (8) must be divisible by 2 x parallel.context (6): each context rank holds two of the 2 x context chunks of every sequence" -- train good.toml --set parallel.context=3 --set parallel.data=1
expect 4 "= 2 ranks, but the job has 4" -- train good.toml --set parallel.data=2
expect 2 "data.files: '/nonexistent/*.txt' matches no readable text file" -- train good.toml --set parallel.data=2 --set data.kind=text --set 'data.files=["/nonexistent/*.txt"]'
expect 1 "--set 'steps=3': expected section.key=value" -- train good.toml --set steps=3
expect 2 "model.n_layer (1) must be at least parallel.pipeline (2): every stage holds at least one layer" -- train good.toml --set parallel.pipeline=2
expect 1 'parallel.weight_prediction applies to schedule = "xpipe" only' -- train good.toml --set parallel.weight_prediction=false
expect 1 'parallel.virtual_stages applies to schedule = "interleaved" only' -- train good.toml --set parallel.virtual_stages=2
expect 1 'parallel.virtual_stages must be at least 2 for schedule = "interleaved"' -- train good.toml --set parallel.schedule=interleaved
expect 2 'model.n_layer (3) must be at least parallel.pipeline x parallel.virtual_stages (4)' -- train good.toml --set model.n_layer=3 --set parallel.schedule=interleaved --set parallel.virtual_stages=2 --set parallel.pipeline=2 --set parallel.micro_batches=2
expect 2 'parallel.micro_batches (3) must be divisible by parallel.pipeline for schedule = "interleaved" (2)' -- train good.toml --set model.n_layer=4 --set parallel.schedule=interleaved --set parallel.virtual_stages=2 --set parallel.pipeline=2 --set parallel.micro_batches=3 --set data.batch_size=6
expect 1 "data.batch_size / parallel.data (4) must be divisible by parallel.micro_batches (3)" -- train good.toml --set parallel.micro_batches=3
expect 2 "image dataset: no train-images-idx3-ubyte[.gz] in '/nonexistent'" -- train resnet.toml --set data.dir=/nonexistent
expect 2 "IDX file './train-images-idx3-ubyte.gz': bad magic number (not an IDX file)" -- train resnet.toml --set data.dir=.
expect 2 "layerpar.levels and layerpar.cfactor do not fit: model.steps (8) must be a multiple of cfactor^(levels-1) (16)" -- train resnet.toml --set layerpar.levels=5
expect 1 'layerpar.relaxation must be "F" or "FCF" (got "C")' -- train resnet.toml --set layerpar.relaxation=C
expect 2 "parallel.context splits a sequence's tokens; the residual network's samples are not sequences: use parallel.data" -- train resnet.toml --set parallel.context=2 --set parallel.data=1
# each model's keys: the other kind's names are refused, with the key to use
expect 1 'resnet.toml: model.n_layer is the GPT'"'"'s: for kind = "resnet" use model.steps' -- deck resnet.toml --set model.n_layer=8
expect 1 'resnet.toml: model.n_embd is the GPT'"'"'s: for kind = "resnet" use model.width' -- deck resnet.toml --set model.n_embd=8
expect 1 'resnet.toml: model.n_head applies to kind = "gpt" only' -- deck resnet.toml --set model.n_head=2
expect 1 'good.toml: model.steps applies to kind = "resnet" only' -- deck good.toml --set model.steps=8
expect 2 'model.steps (8) must be at least parallel.pipeline (16)' -- train resnet.toml --set parallel.pipeline=16
# the softmax regression: neither kind's keys, one layer, no tensor or context split, images only
# (model/model_kind.cpp: the kinds' rules, written once for every kind)
expect 1 'softmax.toml: model.steps applies to kind = "resnet" only' -- deck softmax.toml --set model.steps=8
expect 1 'softmax.toml: model.n_layer applies to kind = "gpt" only' -- deck softmax.toml --set model.n_layer=8
expect 2 "the softmax regression's layers (1) must be at least parallel.pipeline (2)" -- train softmax.toml --set parallel.pipeline=2
expect 2 'model.kind = "softmax" has no tensor split: it runs data parallelism' -- train softmax.toml --set parallel.tensor_cols=2
expect 2 "the softmax regression's samples are not sequences: use parallel.data" -- train softmax.toml --set parallel.context=2
expect 1 'data.kind "random" goes with model.kind = "gpt"' -- train softmax.toml --set data.kind=random
expect 1 '"mgrit" solves the layers of model.kind = "gpt" or "resnet" in parallel (ODE steps); the softmax regression runs data parallelism' -- train softmax.toml --set parallel.schedule=mgrit
expect 1 'model.kind "transformer" names no model kind: it must be "gpt", "resnet" or "softmax"' -- deck good.toml --set model.kind=transformer
expect 1 "layerpar.levels and layerpar.cfactor do not fit: model.steps (8) must be a multiple of cfactor^(levels-1) (" -- train resnet.toml --set layerpar.levels=64 --set layerpar.cfactor=1024
expect 1 "optim.lr must be a finite number (got inf)" -- train good.toml --set optim.lr=inf
expect 1 "run.name must be a plain name: not empty, no '/', not '.' or '..' (got \"..\")" -- train good.toml --set run.name=..
expect 2 "the run needs about" -- train good.toml --set parallel.data=2 --set model.n_embd=16384 --set model.n_head=16 --set model.n_layer=48
expect 1 "the model is far too large for any rank" -- train good.toml --set model.n_embd=4000000000 --set model.n_head=1
expect 1 "--fresh starts over; it cannot be combined with --restart latest" -- train good.toml --fresh --restart latest
expect 1 'data.kind "images" goes with model.kind = "resnet"' -- train good.toml --set data.kind=images
expect 1 "cannot write the trace file '/nonexistent/t.json'" -- train good.toml --trace /nonexistent/t.json
expect 1 'data.token_dir or data.shards must name the token shards for kind = "tokens"' -- train good.toml --set data.kind=tokens
expect 1 'data.val_shards applies to kind = "tokens" only' -- train good.toml --set 'data.val_shards=["v.tok"]'
expect 2 "data.token_dir: strata tokenize needs the folder to write the token shards to" -- tokenize good.toml
expect 2 'strata tokenize: model.kind = "gpt" only' -- tokenize resnet.toml --set data.token_dir=t
expect 2 "data.files: strata tokenize needs the text files to encode" -- tokenize good.toml --set data.token_dir=t
expect 2 "/nonexistent/m.model: cannot read the tokenizer model" -- tokenize good.toml --set data.token_dir=t --set 'data.files=["/usr/share/games/fortunes/science"]' --set data.tokenizer=/nonexistent/m.model
if "$strata" --version >/dev/null 2>&1 && ! ldd "$strata" | grep -q libnccl; then
  expect 2 'parallel.comm_backend = "nccl" needs a CUDA build' -- train good.toml --set parallel.data=2 --set parallel.comm_backend=nccl
fi

expect 1 "strata deck: give a deck file, or --reference (not both)" -- deck
expect 1 'parallel.schedule must be "gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "xpipe" or "mgrit" (got "zigzag")' -- deck good.toml --set parallel.schedule=zigzag
# layer-parallel training of the GPT: buffers, ranks, levels and the splits it refuses
mgrit_gpt=(--set parallel.schedule=mgrit --set model.n_layer=4)
expect 1 'layerpar.buffer_open + buffer_close (4) of model.n_layer (4) leave no block for the MGRIT steps' -- deck good.toml "${mgrit_gpt[@]}" --set layerpar.buffer_open=2 --set layerpar.buffer_close=2
expect 1 'the MGRIT steps (3 = model.n_layer less layerpar.buffer_open and buffer_close) must be at least the layer ranks, parallel.pipeline (4): every layer rank holds at least one step' -- deck good.toml "${mgrit_gpt[@]}" --set layerpar.buffer_open=1 --set parallel.pipeline=4
expect 1 'layerpar.levels and layerpar.cfactor do not fit: the MGRIT steps (3 = model.n_layer less layerpar.buffer_open and buffer_close) must be a multiple of cfactor^(levels-1) (2)' -- deck good.toml "${mgrit_gpt[@]}" --set layerpar.buffer_close=1 --set layerpar.levels=2 --set layerpar.cfactor=2
expect 1 'parallel.tensor_mode = "2d" does not run with schedule = "mgrit": the solver'"'"'s states are whole (B T, C) residual streams' -- deck good.toml "${mgrit_gpt[@]}" --set parallel.tensor_mode=2d --set parallel.tensor_rows=2 --set parallel.tensor_cols=2
expect 1 'parallel.tensor_mode = "1d" with sequence_parallel does not run with schedule = "mgrit"' -- deck good.toml "${mgrit_gpt[@]}" --set parallel.tensor_cols=2 --set parallel.sequence_parallel=true
expect 1 'parallel.context does not run with schedule = "mgrit"' -- deck good.toml "${mgrit_gpt[@]}" --set parallel.context=2
expect 1 'model.moe_experts does not run with schedule = "mgrit"' -- deck good.toml "${mgrit_gpt[@]}" --set model.moe_experts=2
expect 1 'layerpar.buffer_open applies to model.kind = "gpt" only' -- deck resnet.toml --set layerpar.buffer_open=1
expect 1 'layerpar.control = "switch" acts on the gradient checks: set layerpar.check_every to how often they run' -- deck good.toml "${mgrit_gpt[@]}" --set layerpar.control=switch
expect 1 'parallel.schedule "xpipe" runs model.kind = "gpt"; the residual network runs data x pipeline (gpipe, 1f1b, zb-h1 or zb-h2) or data x layer-parallel (mgrit)' -- deck resnet.toml --set parallel.schedule=xpipe
expect 1 'parallel.schedule "interleaved" runs model.kind = "gpt"' -- deck resnet.toml --set parallel.schedule=interleaved --set parallel.virtual_stages=2
expect 1 'model.precision must be "fp32" or "bf16" (got "fp16")' -- train good.toml --set model.precision=fp16
expect 2 'parallel.recompute = "selective" is the GPT'"'"'s' -- train resnet.toml --set parallel.recompute=selective --set parallel.schedule=gpipe
expect 2 'parallel.recompute does not apply to schedule = "mgrit"' -- train resnet.toml --set parallel.recompute=full --set parallel.pipeline=2 --set parallel.schedule=mgrit
expect 1 'parallel.recompute must be "none", "selective" or "full" (got "all")' -- train good.toml --set parallel.recompute=all
expect 2 'parallel.recompute = "full" does not run with schedule = "xpipe"' -- train good.toml --set parallel.recompute=full --set parallel.pipeline=2 --set parallel.schedule=xpipe
expect 2 'parallel.recompute = "selective" does not run with schedule = "zb-h1"' -- train good.toml --set parallel.recompute=selective --set parallel.pipeline=2 --set parallel.schedule=zb-h1
expect 2 'parallel.zero = 1 does not run with schedule = "xpipe"' -- train good.toml --set parallel.zero=1 --set parallel.pipeline=2 --set parallel.schedule=xpipe
expect 1 'parallel.zero must be in [0, 3]' -- train good.toml --set parallel.zero=4

# strata deck prints the resolved deck, which reads back to itself; docs/deck.md is the
# reference the binary prints (regenerate: strata deck --reference > docs/deck.md)
if "$strata" deck good.toml --set optim.lr=0.01 > resolved.toml && grep -q '^lr = 0.01$' resolved.toml &&
   "$strata" deck resolved.toml | tail -n +2 | cmp -s - <(tail -n +2 resolved.toml); then
  echo "ok: strata deck prints the resolved deck, and it reads back to itself"
else
  echo "FAIL: strata deck's resolved deck"; failures=$((failures + 1))
fi
if "$strata" deck --reference | cmp -s - "$deck_doc"; then
  echo "ok: docs/deck.md is what strata deck --reference prints"
else
  echo "FAIL: docs/deck.md is out of date: strata deck --reference > docs/deck.md"; failures=$((failures + 1))
fi

# command-line errors: exit 2 as well
timeout -k 10 60 "$mpiexec" -n 1 "$strata" frobnicate >/dev/null 2>&1
rc=$?
if [ "$rc" -ne 2 ]; then echo "FAIL: unknown subcommand exits $rc, wanted 2"; failures=$((failures + 1)); else echo "ok: unknown subcommand"; fi

# a fault to inject that cannot be read: one line, exit 2, before the run
out=$(timeout -k 10 60 "$mpiexec" -n 2 "$strata" train good.toml --set run.out_dir=$work/inject \
  --inject-fault hang:x 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$out" | grep -c "strata: error: --inject-fault 'hang:x': expected error:STEP:RANK")" -eq 1 ] &&
   [ ! -e $work/inject ]; then
  echo "ok: --inject-fault hang:x: exit 2, one line, no run directory"
else
  echo "FAIL: --inject-fault hang:x: exit $rc: $out"; failures=$((failures + 1))
fi

# Memory. Before anything is allocated, every rank checks the planner's figure for the
# deck's own layout (every split, the schedule, ZeRO, MGRIT) against what it may use: the
# node's memory or its memory cgroup shared by its ranks, and its own rlimits (prlimit
# --data here; plan/memory_fit.hpp). A deck over it is refused in one line, exit 2; the same
# model under a split that fits runs.
fits() {  # description, mpiexec -n, prlimit --data MiB, "refused" or "runs", strata args...
  local what=$1 np=$2 mib=$3 want=$4 out rc
  shift 4
  out=$(timeout -k 10 60 "$mpiexec" -n "$np" prlimit --data=$((mib << 20)) "$strata" train good.toml "$@" \
    --set run.steps=1 --set run.name=fits 2>&1 >/dev/null)
  rc=$?
  if [ $want = refused ] && [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | grep -c 'strata: error')" -eq 1 ] &&
    printf '%s' "$out" | grep -q "the run needs about .* GiB per rank as laid out (.*), but ulimit -d limits each rank to"; then
    echo "ok: $what under $mib MiB a rank: refused, exit 2: $(printf '%s' "$out" | cut -c15-120)..."
  elif [ $want = runs ] && [ $rc -eq 0 ]; then
    echo "ok: $what under $mib MiB a rank: runs"
  else
    echo "FAIL: $what under $mib MiB a rank: exit $rc, wanted it $want; got:"; printf '%s\n' "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}
# a 50M-parameter GPT (770 MiB of parameters, gradients and moments unsplit) on 4 ranks,
# and a mixture of 8 experts (1.04 GiB unsplit) on 2
wide3d=(--set model.n_embd=1024 --set model.n_head=8 --set model.n_layer=4)
experts=(--set model.n_embd=256 --set model.n_head=8 --set model.n_layer=4 --set model.moe_experts=8
  --set model.moe_every=1 --set model.moe_ffn_hidden=4096 --set parallel.data=2)
if command -v prlimit > /dev/null; then
  fits "data=4" 4 600 refused "${wide3d[@]}" --set parallel.data=4
  fits "3D 2x2x1" 4 600 runs "${wide3d[@]}" --set parallel.tensor_mode=3d --set parallel.tensor_x=2 --set parallel.tensor_y=2
  fits "8 experts on each of 2 ranks" 2 900 refused "${experts[@]}"
  fits "8 experts split over 2 ranks" 2 900 runs "${experts[@]}" --set parallel.expert=2
fi

# Out of memory past the check: exit 6 and one line naming the buffer, not a hang or a
# library's abort. A 63M-parameter model (241 MiB a flat buffer) under a data segment per
# rank 32 MiB above the check's figure (prlimit --data: the kernel refuses the rank's
# private allocations past it; the figure counts the model's buffers, not the process's
# code, libraries and OpenBLAS's buffers, over 200 MiB here): on 1 rank, on 2 ranks both
# limited, and on 2 ranks with rank 1 alone limited (rank-local, agreed).
# OpenBLAS maps 128 MiB at load and, where its kernels pack (its Zen and Haswell ones on an
# AVX-only EPYC, 2026-12-06; not its SkylakeX ones on a small product), 128 MiB more at the
# first product.
# (OpenBLAS retried its own failing allocation forever there until strata took the BLAS
# buffers before the model's: model/make_model.cpp. With more than one OpenBLAS thread it still
# does, at load, before main, where no code of strata's runs: this relies on the suite's
# OPENBLAS_NUM_THREADS=1; docs/checkpoints.md's exit codes say so. An allocation inside MPI
# that fails (MPICH's non-blocking reduce-scatter takes a temporary buffer) ends the job
# through MPI's own abort, not exit 6.)
big=(--set model.n_embd=1024 --set model.n_layer=5 --set model.n_head=8)
oom() {  # description, mpiexec -n, then a command prefix before strata
  local what=$1 np=$2 out rc
  shift 2
  out=$(timeout -k 10 60 "$mpiexec" -n "$np" "$@" "$strata" train good.toml "${big[@]}" \
    --set parallel.data="$np" --set run.name=oom 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -eq 6 ] && [ "$(printf '%s\n' "$out" | grep -c 'strata: error')" -eq 1 ] &&
    printf '%s' "$out" | grep -q 'out of memory: [0-9.]* MiB for "[a-z_0-9.]*" could not be allocated'; then
    echo "ok: out of memory, $what: exit 6, $(printf '%s' "$out" | cut -c1-90)"
  else
    echo "FAIL: out of memory, $what: exit $rc; got:"; printf '%s\n' "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}
if command -v prlimit > /dev/null; then
  # the check's figure for the model on 1 rank, from its refusal under 320 MiB (GiB, 2 decimals;
  # OpenBLAS takes its first 128 MiB at load, and retries for ever under much less)
  need=$(timeout -k 10 60 "$mpiexec" -n 1 prlimit --data=$((320 << 20)) "$strata" train good.toml "${big[@]}" 2>&1 |
    sed -nE 's/.*the run needs about ([0-9.]+) GiB per rank.*/\1/p')
  limit=--data=$(echo "($need + 0.005) * 1073741824 / 1 + 32 * 1048576" | bc)
  oom "1 rank" 1 prlimit $limit
  oom "2 ranks" 2 prlimit $limit
  oom "rank 1 of 2" 2 sh -c 'if [ "$PMI_RANK" = 1 ]; then exec prlimit "$0" "$@"; else exec "$@"; fi' $limit
  # ZeRO-3 trains under a limit its state without ZeRO does not fit: a 41.9M-parameter GPT
  # (640 MiB of parameters, gradients and moments unsharded) on 2 ranks of 750 MiB each
  # (bench/zero3_memory_limit.sh; docs/parallelism.md)
  wide=(--set model.n_embd=512 --set model.n_layer=12 --set model.n_head=8 --set model.seq_len=128
    --set model.vocab_size=8192 --set data.batch_size=2 --set run.steps=1 --set parallel.data=2)
  out=$(timeout -k 10 60 "$mpiexec" -n 2 prlimit --data=$((750 << 20)) "$strata" train good.toml "${wide[@]}" \
    --set run.name=wide0 2>&1 >/dev/null)
  rc=$?
  out3=$(timeout -k 10 60 "$mpiexec" -n 2 prlimit --data=$((750 << 20)) "$strata" train good.toml "${wide[@]}" \
    --set parallel.zero=3 --set run.name=wide3 2>&1 >/dev/null)
  rc3=$?
  if [ "$rc" -eq 6 ] && [ "$(printf '%s\n' "$out" | grep -c 'strata: error')" -eq 1 ] &&
    printf '%s' "$out" | grep -q 'out of memory' && [ "$rc3" -eq 0 ] && [ -s runs/wide3/metrics.csv ]; then
    echo "ok: under 750 MiB a rank, zero 0 exits 6 ($(printf '%s' "$out" | cut -c15-60)...) and zero 3 trains"
  else
    echo "FAIL: under 750 MiB a rank: zero 0 exit $rc, zero 3 exit $rc3; got:"
    printf '%s\n' "$out" "$out3" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
else
  echo "skipped: out of memory (no prlimit)"
fi

# the good deck runs
if ! timeout -k 10 120 "$mpiexec" -n 2 "$strata" train good.toml --set parallel.data=2 >run.log 2>&1; then
  echo "FAIL: the good deck did not run:"; cat run.log; failures=$((failures + 1))
elif ! grep -q "step     2/2 | loss" run.log || [ ! -s runs/run/metrics.csv ] || [ ! -s runs/run/deck.toml ]; then
  echo "FAIL: the good deck ran but its progress line or run directory is missing:"; cat run.log; failures=$((failures + 1))
else
  echo "ok: good deck trains and writes runs/run/{deck.toml,metrics.csv}"
fi
# a rank that dies mid-run brings the job down (non-zero exit), it does not hang
name="killed-$$"  # only this test's ranks carry it
timeout -k 10 120 "$mpiexec" -n 2 "$strata" train good.toml --set parallel.data=2 --set run.steps=100000 \
  --set run.name=$name >killed.log 2>&1 &
job=$!
for _ in $(seq 1 100); do grep -q "step     1/" killed.log 2>/dev/null && break; sleep 0.2; done
victim=$(for p in $(pgrep -x strata); do tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q "run.name=$name" && echo $p; done | tail -1)
if [ -z "$victim" ]; then
  echo "FAIL: could not find a strata rank to kill"; failures=$((failures + 1))
else
  kill -9 "$victim"
  wait "$job"
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
    echo "FAIL: killing rank pid $victim left the job with exit $rc (124 = hung until timeout)"; failures=$((failures + 1))
  else
    echo "ok: killing one rank ends the job (exit $rc)"
  fi
fi
exit $((failures > 0))

