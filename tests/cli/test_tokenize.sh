#!/usr/bin/env bash
# Subword data end to end, through the real executable, on a slice of fortunes:
#  - `strata tokenize` on 2 ranks trains a 512-piece BPE tokenizer and writes several
#    token shards; on 1 rank it writes the same files byte for byte; the shards decode to
#    the corpus (Python's sentencepiece, reading the shards with tools/strata_data.py) and
#    are what Python's sentencepiece encodes; tools/strata_data.py's write_shard writes the
#    same bytes as strata; a second tokenize into the same folder is
#    refused (exit 2) and leaves it as it was;
#  - training on the shards: 1 rank and data = 2 give the same losses, and so does a
#    restart of the 1-rank run's step-10 checkpoint on 2 ranks; validation is
#    reported in bits per byte; generate decodes through the tokenizer, also from a copy
#    of the checkpoint far from the shards (checkpoints carry the tokenizer);
#  - the checkpoint in PyTorch (tools/ckpt_to_torch.py reading the shards): same
#    validation loss and gradients;
#  - one-line errors, exit 2: no shards, a truncated shard, shards of another tokenizer,
#    a tokenizer larger than the model's vocabulary; an llm.c token outside the vocabulary
#    met mid-run on 2 ranks ends the job.
# Usage: test_tokenize.sh STRATA MPIEXEC CKPT_BATCH_GRADS TOOLS_DIR COMPARE_LOSSES
set -u
strata=$1 mpiexec=$2 grads_tool=$3 tools=$4 compare=$5
source "$(dirname "$0")/../support/test_lib.sh"
cd "$work"
cat > deck.toml <<'DECK'
[run]
name = "spm"
steps = 20
log_every = 5
val_every = 10
val_batches = 2
checkpoint_every = 10
[model]
n_layer = 2
n_embd = 64
n_head = 4
vocab_size = 512
seq_len = 64
[data]
kind = "tokens"
files = ["/usr/share/games/fortunes/computers", "/usr/share/games/fortunes/science", "/usr/share/games/fortunes/linux"]
token_dir = "tok"
shard_mb = 0.1
batch_size = 8
[optim]
lr = 2e-3
DECK

# --- tokenize on 2 ranks, then on 1
if timeout 120 "$mpiexec" -n 2 "$strata" tokenize deck.toml >tok2.log 2>&1 && [ -f tok/tokenizer.model ] && [ ! -e tok.partial ]; then
  shards=$(ls tok/shard_*.tok | wc -l)
  if [ "$shards" -ge 3 ] && grep -q "in $shards shards; vocabulary 512 (trained in" tok2.log; then
    ok "tokenize on 2 ranks: $shards shards and tokenizer.model ($(tail -1 tok2.log | sed 's/.*-> //'))"
  else
    fail "tokenize wrote $shards shards"; cat tok2.log
  fi
else
  fail "tokenize on 2 ranks"; cat tok2.log
fi
if timeout 120 "$strata" tokenize deck.toml --set data.token_dir=tok1 >tok1.log 2>&1 && diff -r tok tok1 >/dev/null; then
  ok "tokenize on 1 rank writes the same files byte for byte"
else
  fail "tokenize on 1 rank differs"; cat tok1.log; diff -r tok tok1 | head -3
fi
if timeout 120 "$mpiexec" -n 2 "$strata" tokenize deck.toml --set data.token_dir=tok_named --set data.tokenizer=tok/tokenizer.model >named.log 2>&1 &&
   diff -r tok tok_named >/dev/null && grep -q "encoding with tok/tokenizer.model" named.log; then
  ok "tokenize with a named .model (data.tokenizer): the same shards"
else
  fail "tokenize with data.tokenizer"; cat named.log
fi
sums=$(cat tok/* | md5sum)
timeout 60 "$mpiexec" -n 2 "$strata" tokenize deck.toml >again.log 2>&1; rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <again.log)" -eq 1 ] && grep -q "already holds files; strata tokenize never overwrites" again.log &&
   [ "$(cat tok/* | md5sum)" = "$sums" ]; then
  ok "tokenize into a folder that holds shards: exit 2, one line, the shards untouched"
else
  fail "tokenize again: rc=$rc"; cat again.log
fi

# --- the shards against Python's sentencepiece
if timeout 120 /usr/bin/python3 - "$tools" <<'PY'
import glob, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import sentencepiece as spm
from strata_data import read_shard
sp = spm.SentencePieceProcessor(model_file="tok/tokenizer.model")
ids = np.concatenate([read_shard(p)[0] for p in sorted(glob.glob("tok/shard_*.tok"))]).tolist()
text = b"".join(open(f, "rb").read() for f in sorted(["/usr/share/games/fortunes/computers",
        "/usr/share/games/fortunes/science", "/usr/share/games/fortunes/linux"])).decode("utf-8")
assert sp.get_piece_size() == 512
# the format both ways: Python's writer gives strata's bytes
from strata_data import write_shard
write_shard("py.tok", read_shard("tok/shard_000001.tok")[0], 512)
assert open("py.tok", "rb").read() == open("tok/shard_000001.tok", "rb").read(), "write_shard differs from strata's shard"
assert sp.decode(ids) == text, "the shards do not decode to the corpus"
same = sp.encode(text) == ids
print(f"{len(ids)} tokens decode to the {len(text.encode())} bytes of the corpus; python encodes the same ids: {same}")
assert same
PY
then ok "the shards decode to the corpus and are Python sentencepiece's encoding of it; tools/strata_data.py writes strata's bytes"; else fail "python sentencepiece cross-check"; fi

# --- train on the shards: 1 rank vs data = 2
timeout 120 "$strata" train deck.toml --set run.name=one >one.log 2>&1 || { fail "train on 1 rank"; cat one.log; }
timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set run.name=two --set parallel.data=2 >two.log 2>&1 ||
  { fail "train on 2 ranks"; cat two.log; }
if "$compare" runs/one/metrics.csv runs/two/metrics.csv 1e-6 1e-5 >cmp.log; then
  ok "token shards, 1 rank vs data = 2: $(cat cmp.log)"
else
  fail "losses differ"; cat cmp.log
fi
if grep -q "strata: data: [0-9]* token shards, [0-9]* train / [0-9]* validation tokens; tokenizer tok/tokenizer.model (512 pieces)" one.log &&
   grep -qE "val [0-9.]+ \([0-9.]+ bits/byte\)" one.log && grep -q "val_bpb" runs/one/metrics.csv; then
  ok "validation in bits per byte: $(grep -oE 'val [0-9.]+ \([0-9.]+ bits/byte\)' one.log | tail -1)"
else
  fail "no bits per byte"; cat one.log
fi
# a restart from step 10 on 2 ranks sees the same batches: the uninterrupted run's losses
timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set run.name=resumed --set parallel.data=2 \
  --restart runs/one/checkpoints/ckpt_00000010.h5 >resumed.log 2>&1 || { fail "restart on 2 ranks"; cat resumed.log; }
if "$compare" <(grep -E '^(15|20),' runs/one/metrics.csv | sed '1i step,loss') \
              <(grep -E '^(15|20),' runs/resumed/metrics.csv | sed '1i step,loss') 1e-6 1e-5 >cmp2.log; then
  ok "restart from step 10 on data = 2: $(cat cmp2.log)"
else
  fail "restart losses differ"; cat cmp2.log
fi
ckpt=runs/one/checkpoints/ckpt_00000020.h5
if timeout 60 "$strata" generate "$ckpt" --prompt "The computer" --tokens 30 >gen.out 2>&1 && head -c 12 gen.out | grep -q "The computer" &&
   [ "$(wc -c <gen.out)" -gt 30 ]; then
  ok "generate decodes through the tokenizer: $(head -c 60 gen.out | tr '\n' ' ')"
else
  fail "generate"; cat gen.out
fi

if timeout 60 "$strata" generate "$ckpt" --prompt "The computer" --tokens 30 --tokenizer tok1/tokenizer.model >gen1.out 2>&1 &&
   cmp -s gen.out gen1.out; then
  ok "generate --tokenizer with a copy of the tokenizer: the same text"
else
  fail "generate --tokenizer"; cat gen1.out
fi
# the checkpoint carries its tokenizer: copied where no token_dir is, it still generates
mkdir elsewhere && cp "$ckpt" elsewhere/
if (cd elsewhere && timeout 60 "$strata" generate ckpt_00000020.h5 --prompt "The computer" --tokens 30 >gen2.out 2>&1) &&
   cmp -s gen.out elsewhere/gen2.out &&
   timeout 60 "$strata" inspect "$ckpt" 2>&1 | grep -q "/tokenizer/model  SentencePiece model, [0-9]* bytes  ok"; then
  ok "the checkpoint carries its tokenizer (/tokenizer/model, checksummed): generate elsewhere gives the same text"
else
  fail "tokenizer in the checkpoint"; cat elsewhere/gen2.out; timeout 60 "$strata" inspect "$ckpt" | tail -3
fi
# --- in PyTorch, from the shards
if timeout 120 "$grads_tool" "$ckpt" grads.h5 >grads.log 2>&1 &&
   timeout 300 /usr/bin/python3 "$tools/ckpt_to_torch.py" "$ckpt" --grads grads.h5 --check >torch.log 2>&1; then
  ok "PyTorch on the token shards: $(grep -i 'validation loss' torch.log | head -1)"
else
  fail "ckpt_to_torch on token shards"; cat grads.log torch.log
fi

# --- errors: one line, exit 2
expect_error() {  # what pattern command...
  local what=$1 pattern=$2; shift 2
  timeout 60 "$@" >err.log 2>&1; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <err.log)" -eq 1 ] && grep -q -- "$pattern" err.log; then ok "$what: $(cat err.log)"
  else fail "$what: rc=$rc"; cat err.log; fi
}
expect_error "no shards" "data.shards: 'nowhere/shard_\*.tok' matches no readable token shard" \
  "$strata" train deck.toml --set data.token_dir=nowhere
cp -r tok cut && truncate -s -3 cut/shard_000001.tok
expect_error "a truncated shard" "cut/shard_000001.tok: .*header" "$strata" train deck.toml --set data.token_dir=cut
cp tok1/tokenizer.model other.model
timeout 120 "$strata" tokenize deck.toml --set data.token_dir=tok400 --set model.vocab_size=400 >/dev/null 2>&1
expect_error "shards of another tokenizer" "do not belong together" \
  "$strata" train deck.toml --set data.tokenizer=tok400/tokenizer.model
expect_error "a tokenizer larger than the model's vocabulary" "tok/tokenizer.model: the tokenizer has 512 pieces, more than model.vocab_size = 400" \
  "$strata" tokenize deck.toml --set data.tokenizer=tok/tokenizer.model --set model.vocab_size=400 --set data.token_dir=t400
# an llm.c file records no vocabulary: its tokens are checked when a step reads them; the
# ranks that meet one end the job (exit 2) with a line naming the file and position
/usr/bin/python3 -c 'import numpy as np
h = np.zeros(256, dtype="<i4"); h[:3] = [20240520, 1, 20000]
open("llmc_train.bin", "wb").write(h.tobytes() + np.full(20000, 600, dtype="<u2").tobytes())'
timeout 60 "$mpiexec" -n 2 "$strata" train deck.toml --set run.name=llmc --set parallel.data=2 \
  --set 'data.shards=["llmc_train.bin"]' --set 'data.val_shards=["tok/shard_000000.tok"]' >llmc.log 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "strata: error: rank [01]: llmc_train.bin: token 600 at position [0-9]* is outside model.vocab_size = 512" llmc.log &&
   [ ! -e runs/llmc/checkpoints/LATEST ]; then
  ok "an llm.c token outside the vocabulary mid-run: exit 2, $(grep -m1 'strata: error' llmc.log)"
else
  fail "llm.c token outside the vocabulary: rc=$rc"; cat llmc.log
fi
expect_error "generate with a tokenizer that is not there" "nowhere.model: cannot read the tokenizer model" \
  "$strata" generate "$ckpt" --tokenizer nowhere.model
finish
