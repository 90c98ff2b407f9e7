#!/usr/bin/env bash
# Models in and out through the real executable (docs/interop.md):
#  - a checkpoint trained on 2 ranks exported by `strata export` as Hugging Face
#    safetensors and as an llm.c file (fp32 and bf16, on 1 rank and under mpiexec -n 2):
#    read by check_gpt2_interop.py's own readers, every tensor equals the checkpoint's, and
#    an independent PyTorch GPT-2 (written from GPT2LMHeadModel) gives strata's loss of a
#    batch to 1e-5;
#  - a ZeRO-3, a 2-stage and a 3D checkpoint exported the same way;
#  - model.init_from of each export and of the checkpoint, on 1 rank, 2 ranks with a 1D
#    tensor split, 2 pipeline stages, a 3D split and ZeRO-3 over 2 replicas (the weights
#    read into each rank's parts): the same first loss everywhere (the same weights),
#    the source recorded in the checkpoints' init_from attribute, and a restart that
#    ignores init_from;
#  - a padded vocabulary (llm.c's Vp) exported and read back;
#  - refusals: a non-empty output folder, an existing output file, a mixture-of-experts
#    checkpoint, an unknown format; bad files (truncated safetensors, overlapping offsets,
#    offsets past the end, a wrong dtype, a missing tensor, a shape mismatch, an llm.c file
#    with a wrong magic or version or truncated): one line each, exit 2, on 2 ranks.
# Usage: test_interop.sh STRATA MPIEXEC CKPT_BATCH_GRADS TESTS_DIR
set -u
strata=$1 mpiexec=$2 grads_tool=$3 tests=$4
source "$tests/support/test_lib.sh"
cd "$work"
check=("/usr/bin/python3" "$tests/tools/check_gpt2_interop.py")
cat > deck.toml <<'DECK'
[run]
name = "ref"
steps = 10
log_every = 1
val_batches = 2
checkpoint_every = 10
[model]
n_layer = 2
n_embd = 64
n_head = 4
seq_len = 64
[data]
files = ["/usr/share/games/fortunes/*"]
batch_size = 8
[parallel]
data = 2
[optim]
lr = 2e-3
DECK
timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml > train.log 2>&1 || { fail "training the reference"; cat train.log; finish; }
ckpt=runs/ref/checkpoints/ckpt_00000010.h5

# --- exports, checked by the formats' own definitions
ex() { timeout 120 "$@" > export.log 2>&1 || { fail "export: $*"; cat export.log; }; cat export.log; }
ex "$strata" export $ckpt hf/ --format hf   # a trailing slash names the same folder
ex "$mpiexec" -n 2 "$strata" export $ckpt hf-bf16 --format hf --dtype bf16
ex "$strata" export $ckpt m.bin --format llmc
ex "$mpiexec" -n 2 "$strata" export $ckpt mb.bin --format llmc --dtype bf16
timeout 120 "$grads_tool" $ckpt grads.h5 || fail "ckpt_batch_grads"
timeout 300 "${check[@]}" hf hf $ckpt grads.h5 && ok "hf export: tensors and the independent GPT-2's loss" || fail "hf export check"
timeout 120 "${check[@]}" hf hf-bf16 $ckpt && ok "hf bf16 export" || fail "hf bf16 export check"
timeout 120 "${check[@]}" llmc m.bin $ckpt && ok "llm.c export" || fail "llm.c export check"
timeout 120 "${check[@]}" llmc mb.bin $ckpt && ok "llm.c bf16 export" || fail "llm.c bf16 export check"
grep -q "ids 0-255\|token id b (0-255)" hf/README.md && ok "the export's README says how byte-level ids map" || fail "README of the export"

# a ZeRO-3 checkpoint (parameters and moments written from each rank's parts), a 2-stage
# one and a 3D one (1 x 1 x 2: weight blocks sharded over depth) export the same way
for layout in "parallel.zero=3" "parallel.pipeline=2 --set parallel.data=1" \
    "parallel.tensor_mode=3d --set parallel.tensor_depth=2 --set parallel.data=1"; do
  name=ref-$(echo $layout | cut -c10-13)
  timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set run.name=$name --set $layout > $name.log 2>&1 ||
    { fail "training $layout"; cat $name.log; }
  ex "$strata" export runs/$name/checkpoints/ckpt_00000010.h5 $name.bin --format llmc
  timeout 120 "${check[@]}" llmc $name.bin runs/$name/checkpoints/ckpt_00000010.h5 > /dev/null &&
    ok "llm.c export of a $layout checkpoint" || fail "llm.c export of a $layout checkpoint"
done

# --- init_from from the command line: the same weights, so the same first loss everywhere
first_loss() { sed -n 's/^step *1\/2 | loss \([0-9.]*\).*/\1/p' "$1"; }
losses=""
k=0
for layout in "1" "2 --set parallel.tensor_cols=2" "2 --set parallel.pipeline=2" \
    "2 --set parallel.tensor_mode=3d --set parallel.tensor_y=2" "2 --set parallel.data=2 --set parallel.zero=3"; do
  set -- $layout
  ranks=$1; shift
  for src in hf m.bin $ckpt; do
    k=$((k + 1))
    name=ft-$k
    if timeout 120 "$mpiexec" -n $ranks "$strata" train deck.toml --set run.name=$name --set run.steps=2 \
        --set parallel.data=1 --set "model.init_from=\"$src\"" "$@" > $name.log 2>&1; then
      losses="$losses $(first_loss $name.log)"
      grep -q "strata: init_from: .* s to read" $name.log || fail "$name: no init_from line"
      "$strata" inspect runs/$name/checkpoints/ckpt_00000002.h5 2>/dev/null | grep -q "^init_from  *.*$src" ||
        fail "$name: the checkpoint does not record init_from"
    else
      fail "init_from $src on $ranks ranks $*"; cat $name.log
    fi
  done
done
all_equal 15 $losses &&
  ok "init_from of hf, llm.c and the checkpoint on 1 rank, t=2, 2 stages, 3D 1x2x1 and ZeRO-3 over 2: first loss $losses" ||
  fail "first losses differ: $losses"
name=ft-1  # hf on one rank
# a restart continues from the run's own checkpoint, whatever init_from names now
timeout 120 "$strata" train deck.toml --set run.name=$name --set run.steps=4 --set parallel.data=1 \
  --set 'model.init_from="no/such/file"' --restart latest > restart.log 2>&1 &&
  grep -q "restart: read" restart.log && ok "a restart ignores model.init_from" || { fail "restart with init_from"; cat restart.log; }
"$strata" inspect runs/$name/checkpoints/ckpt_00000004.h5 2>/dev/null | grep -q "^init_from  *Hugging Face safetensors 'hf/model.safetensors'" &&
  ok "init_from carried through the restart" || fail "init_from attribute after the restart"

# --- a padded vocabulary (llm.c's Vp) out and in
timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set run.name=pad --set model.padded_vocab_size=384 \
  --set parallel.data=1 --set parallel.tensor_cols=2 > pad.log 2>&1 || { fail "padded training"; cat pad.log; }
pad=runs/pad/checkpoints/ckpt_00000010.h5
ex "$strata" export $pad pad.bin --format llmc
ex "$strata" export $pad pad-hf --format hf
timeout 120 "${check[@]}" llmc pad.bin $pad && ok "padded llm.c export: Vp 384, padding zero" || fail "padded llm.c export"
timeout 120 "${check[@]}" hf pad-hf $pad && ok "padded hf export: the 256 real rows" || fail "padded hf export"
timeout 120 "$grads_tool" $pad grads-pad.h5 && timeout 300 /usr/bin/python3 "$tests/../tools/ckpt_to_torch.py" $pad \
  --grads grads-pad.h5 --check > pad-torch.log 2>&1 && ok "the padded checkpoint in PyTorch: $(grep 'batch loss' pad-torch.log)" ||
  { fail "the padded checkpoint in PyTorch"; cat pad-torch.log; }
for src in pad.bin pad-hf; do
  timeout 120 "$strata" train deck.toml --set run.name=pad-$src --set run.steps=2 --set parallel.data=1 \
    --set model.padded_vocab_size=384 --set "model.init_from=\"$src\"" > pad-$src.log 2>&1 || fail "init_from $src (padded)"
done
[ "$(first_loss pad-pad.bin.log)" = "$(first_loss pad-pad-hf.log)" ] && [ -n "$(first_loss pad-pad.bin.log)" ] &&
  ok "padded exports read back to the same first loss" || fail "padded read-back losses differ"

# --- refusals and bad files: one line, exit 2
refuse() {  # description, command...
  local what=$1; shift
  timeout 120 "$@" > out.log 2> err.log
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -c '^strata: error:' err.log)" = 1 ]; then ok "$what: $(cat err.log)"
  else fail "$what: exit $rc"; cat err.log out.log; fi
}
mkdir full && touch full/x
refuse "export into a non-empty folder" "$strata" export $ckpt full --format hf
refuse "export over an existing file" "$strata" export $ckpt m.bin --format llmc
refuse "an unknown format" "$strata" export $ckpt x --format onnx
timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set run.name=moe --set model.moe_experts=4 --set run.steps=2 \
  --set run.checkpoint_every=2 > moe.log 2>&1 || fail "moe training"
refuse "a mixture-of-experts checkpoint" "$strata" export runs/moe/checkpoints/ckpt_00000002.h5 moe-hf --format hf
[ ! -e moe-hf ] && [ -z "$(ls -d moe-hf.partial* 2>/dev/null)" ] && ok "nothing left behind by a refused export" || fail "leftovers"
"${check[@]}" bad bad hf m.bin > /dev/null || fail "making the bad files"
for f in bad/*; do
  refuse "init_from $f" "$mpiexec" -n 2 "$strata" train deck.toml --set run.name=bad --set run.steps=1 \
    --set "model.init_from=\"$f\""
done
refuse "init_from with another width" "$mpiexec" -n 2 "$strata" train deck.toml --set run.name=bad --set model.n_embd=32 \
  --set 'model.init_from="m.bin"'
refuse "init_from a missing file" "$strata" train deck.toml --set run.name=bad --set parallel.data=1 \
  --set 'model.init_from="nothing-here"'
finish
