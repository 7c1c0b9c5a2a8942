"""PyTorch's side of examples/shakespeare-char.yaml: the same character-level GPT, trained the same way.

    /usr/bin/python3 bench/shakespeare_torch.py [--threads N] [--steps S] [--data PATH]

The reference for the README's Shakespeare table. Mirrors, definition for definition:
- data (src/data/textDataset.ts, textWindows.ts, vocabulary.ts): the file as UTF-8 code points (a
  leading byte-order mark dropped); the first floor(0.9·n) characters train, the rest validate; the
  vocabulary is the training split's characters sorted by code point; a training window starts at a
  uniform offset in [0, n_train − 64) and its labels are the 64 characters that follow each
  position; validation windows start every 64 characters.
- model (src/nn/embedding.ts, positionEncoding.ts, transformerBlock.ts, attention.ts,
  tiedEmbedding.ts): token embedding 65×128 and learned positions [64, 128], both N(0, 0.02²); 4
  pre-norm blocks, x + MHA(LN(x)) (nn.MultiheadAttention(128, 4, batch_first), causal, PyTorch's
  own initialisation, which is paratrain's) then x + Linear(GELU(Linear(LN(x)))) (128 → 512 → 128,
  exact erf GELU, weights Xavier uniform and biases zero as paratrain's dense layers start); a final
  LayerNorm; logits = h·Wᵀ with the embedding's W, no bias. LayerNorm ε 1e-5 everywhere.
- training (src/nn/tokenCrossEntropy.ts, src/optim/): cross-entropy averaged over every position of
  the batch of 12; global gradient norm clipped at 1; AdamW (lr 1e-3, betas (0.9, 0.99), eps 1e-8,
  decoupled weight decay 0.1 on every parameter, as paratrain's optimizer steps one flat buffer),
  its learning rate set before each step by learning_rate_at, a copy of src/optim/schedule.ts.
- reporting: the run is two epochs of steps/2 steps (1,000 each by default); after each, the mean
  loss over every position of every validation window (train.evalEvery 1). trainLoss is the mean of
  the last epoch's batch losses, as paratrain's epoch loss.

What cannot match: the random streams (initial weights, window offsets: this script seeds torch with
1337 and its own torch.Generator with 1337; paratrain keys counter-based draws by its seed), and
float rounding (paratrain sums softmax rows, clipping norms and Adam's update in float64 and takes
erf from a fit with relative error < 1.2e-7; PyTorch works in float32 with its own BLAS order).
Prints one JSON line: threads, steps, seconds (training wall time, evaluation excluded), valLoss,
trainLoss; each evaluation also goes to stderr as it happens.
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

CONTEXT = 64
WIDTH = 128
HEADS = 4
BLOCKS = 4
MLP = 4 * WIDTH
BATCH = 12
VALIDATION = 0.1
BASE_LR = 1e-3
MIN_LR = 1e-4
WARMUP_STEPS = 100
SEED = 1337
EVAL_BATCH = 64
REPO = Path(__file__).resolve().parent.parent


def learning_rate_at(step, total_steps):
    """src/optim/schedule.ts's learningRateAt for warmup then cosine; `step` is 0-based."""
    if step < WARMUP_STEPS:
        return BASE_LR * (step + 1) / WARMUP_STEPS
    span = max(total_steps - WARMUP_STEPS, 1)
    progress = min((step - WARMUP_STEPS) / span, 1)
    return MIN_LR + (BASE_LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * progress))


def load_splits(path):
    """The training and validation token ids and the vocabulary size, split as textDataset.ts does."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        sys.exit(f"--data: {path} does not exist; fetch data/tinyshakespeare/input.txt or name the text file")
    except UnicodeDecodeError:
        sys.exit(f"--data: {path} is not valid UTF-8 text; save it as UTF-8")
    cut = math.floor(len(text) * (1 - VALIDATION))
    train, validation = text[:cut], text[cut:]
    if len(train) <= CONTEXT or len(validation) <= CONTEXT:
        sys.exit(f"--data: {path} is too short for a window of {CONTEXT} characters in each split")
    symbols = sorted(set(train))
    ids = {ch: k for k, ch in enumerate(symbols)}
    unknown = sorted(set(validation) - set(symbols))
    if unknown:
        sys.exit(f"--data: the validation split holds characters outside the training vocabulary: {unknown!r}")
    def encode(part):
        return torch.tensor([ids[ch] for ch in part], dtype=torch.long)

    return encode(train), encode(validation), len(symbols)


class Block(nn.Module):
    """GPT-2's pre-norm block, as transformerResiduals builds it (no dropout)."""

    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH, eps=1e-5)
        # PyTorch's init is paratrain's: Xavier in_proj_weight, U(±1/√D) out_proj.weight, zero biases
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.ln2 = nn.LayerNorm(WIDTH, eps=1e-5)
        self.fc1 = nn.Linear(WIDTH, MLP)
        self.fc2 = nn.Linear(MLP, WIDTH)
        for dense in (self.fc1, self.fc2):
            # paratrain's dense layers: Glorot-uniform kernels (gelu and linear alike), zero biases
            nn.init.xavier_uniform_(dense.weight)
            nn.init.zeros_(dense.bias)

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="none"))


class CharGpt(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.embedding = nn.Embedding(vocab, WIDTH)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.positions = nn.Parameter(torch.randn(CONTEXT, WIDTH) * 0.02)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.ln = nn.LayerNorm(WIDTH, eps=1e-5)
        # True above the diagonal: position t attends to 0…t
        self.register_buffer("mask", torch.triu(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool), diagonal=1))

    def forward(self, ids):
        x = self.embedding(ids) + self.positions
        for block in self.blocks:
            x = block(x, self.mask)
        return self.ln(x) @ self.embedding.weight.t()  # the tied output projection


def token_loss(model, inputs, labels):
    logits = model(inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def random_batch(tokens, generator):
    starts = torch.randint(0, len(tokens) - CONTEXT, (BATCH,), generator=generator)
    rows = starts[:, None] + torch.arange(CONTEXT + 1)
    window = tokens[rows]
    return window[:, :-1], window[:, 1:]


@torch.no_grad()
def validation_loss(model, tokens):
    """The mean over every position of the windows at 0, 64, 128… (those with a next character for each)."""
    count = (len(tokens) - CONTEXT - 1) // CONTEXT + 1
    rows = torch.arange(count)[:, None] * CONTEXT + torch.arange(CONTEXT + 1)
    total = 0.0
    for at in range(0, count, EVAL_BATCH):
        window = tokens[rows[at : at + EVAL_BATCH]]
        total += token_loss(model, window[:, :-1], window[:, 1:]).item() * len(window)
    return total / count


def positive(value):
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=positive, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--steps", type=positive, default=2000, help="optimizer steps, two epochs (default 2000)")
    parser.add_argument("--data", type=Path, default=REPO / "data/tinyshakespeare/input.txt", help="the text file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    train, validation, vocab = load_splits(args.data)
    model = CharGpt(vocab)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=BASE_LR, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1
    )
    windows = torch.Generator().manual_seed(SEED)
    epoch_ends = sorted({args.steps // 2, args.steps} - {0})
    seconds, epoch_losses, val_loss = 0.0, [], float("nan")
    started = time.perf_counter()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, args.steps)
        inputs, labels = random_batch(train, windows)
        loss = token_loss(model, inputs, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        epoch_losses.append(loss.item())
        if step + 1 in epoch_ends:
            seconds += time.perf_counter() - started
            val_loss = validation_loss(model, validation)
            train_loss = sum(epoch_losses) / len(epoch_losses)
            print(f"step {step + 1}: trainLoss {train_loss:.4f} valLoss {val_loss:.4f}", file=sys.stderr)
            if step + 1 < args.steps:
                epoch_losses = []
            started = time.perf_counter()
    result = {
        "threads": args.threads,
        "steps": args.steps,
        "seconds": round(seconds, 3),
        "valLoss": round(val_loss, 4),
        "trainLoss": round(train_loss, 4),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
