"""Train a tiny two-layer Gated DeltaNet model with lina's forward and backward.

    PYTHONPATH=python python3 examples/python/train_tiny.py [--steps 300]

The task is associative recall: a sequence lists key-value pairs, then asks
for the keys again in another order; the model must answer each with its
value, which only the recurrent layer can carry from the first half to the
second. Before training, the gradients of the first lina call are checked
against a float64 PyTorch recurrence; then the loss must fall. Exits 1 if
either fails. Needs a CUDA GPU, torch and liblina.so (docs/training.md).
"""
import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import lina

DT = torch.bfloat16  # what lina's kernels read for q, k and v


class GatedDeltaNet(nn.Module):
    """x -> q, k, v (a short causal convolution, as fla's layer has, then
    l2-normalized q, k), log gate g, beta -> lina -> out."""

    def __init__(self, d, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.norm = nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * heads * head_dim, bias=False)
        self.conv = nn.Conv1d(3 * heads * head_dim, 3 * heads * head_dim, 4,
                              groups=3 * heads * head_dim, padding=3)
        self.gate_beta = nn.Linear(d, 2 * heads)
        self.out = nn.Linear(heads * head_dim, d, bias=False)
        with torch.no_grad():  # gates open at first: exp(g) near 0.95
            self.gate_beta.bias[:heads].fill_(3.0)

    def project(self, x):
        B, T, _ = x.shape
        h = self.norm(x)
        qkv = self.conv(self.qkv(h).transpose(1, 2))[..., :T]  # causal
        q, k, v = F.silu(qkv.transpose(1, 2)).view(
            B, T, 3, self.heads, self.head_dim).unbind(2)
        a, b = self.gate_beta(h).float().chunk(2, dim=-1)
        # Casts are explicit: under autocast, normalize would return fp32.
        return (F.normalize(q, dim=-1).to(DT), F.normalize(k, dim=-1).to(DT),
                v.to(DT), F.logsigmoid(a), torch.sigmoid(b))

    def forward(self, x):
        o, _ = lina.chunk_gated_delta_rule(*self.project(x))
        return x + self.out(o.flatten(2))


class Model(nn.Module):
    def __init__(self, vocab, d=128, heads=2, head_dim=64, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.mixers = nn.ModuleList(GatedDeltaNet(d, heads, head_dim)
                                    for _ in range(layers))
        self.mlps = nn.ModuleList(nn.Sequential(
            nn.RMSNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            for _ in range(layers))
        self.head = nn.Sequential(nn.RMSNorm(d), nn.Linear(d, vocab))

    def forward(self, tokens):
        x = self.embed(tokens)
        for mixer, mlp in zip(self.mixers, self.mlps):
            x = mixer(x)
            x = x + mlp(x)
        return self.head(x)


def recall_batch(n, pairs, keys, device, gen):
    """Tokens [n, 4 pairs - 1] and targets (-100 except after each asked
    key). Keys are 0..keys-1, values keys..2 keys-1."""
    key = torch.rand(n, keys, generator=gen).argsort(-1)[:, :pairs]
    value = torch.randint(keys, 2 * keys, (n, pairs), generator=gen)
    asked = torch.rand(n, pairs, generator=gen).argsort(-1)
    seq = torch.cat([torch.stack([key, value], -1).flatten(1),
                     torch.stack([key.gather(1, asked),
                                  value.gather(1, asked)], -1).flatten(1)], 1)
    targets = torch.full_like(seq, -100)
    targets[:, 2 * pairs + 1::2] = seq[:, 2 * pairs + 1::2]
    return seq[:, :-1].to(device), targets[:, 1:].to(device)


def gdn_float64(q, k, v, g, beta):
    """fla's gated delta rule one token at a time, in float64: with
    S' = exp(g_t) S_{t-1}, S_t = S' + k_t (beta_t (v_t - S'^T k_t))^T and
    o_t = S_t^T q_t / sqrt(K)."""
    q, k, v, g, beta = (t.double() for t in (q, k, v, g, beta))
    B, T, H, K = q.shape
    S = q.new_zeros(B, H, K, v.shape[-1])
    out = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None]
        u = (v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S)) \
            * beta[:, t, :, None]
        S = S + k[:, t, :, :, None] * u[:, :, None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * K ** -0.5, S))
    return torch.stack(out, 1)


def check_gradients(model, tokens, tolerance):
    """dL/d(q, k, v, g, beta) of the first lina call, lina vs float64, for
    a random linear loss. Returns the largest norm-relative error."""
    with torch.no_grad(), torch.autocast("cuda", dtype=DT):
        inputs = model.mixers[0].project(model.embed(tokens))
    names = ("q", "k", "v", "g", "beta")
    ours = [t.detach().requires_grad_() for t in inputs]
    ref = [t.detach().double().requires_grad_() for t in inputs]
    o, _ = lina.chunk_gated_delta_rule(*ours)
    # Rounded to bf16 as lina's dO is, so both sides get the same one.
    w = torch.randn(o.shape, device=o.device).to(DT).double()
    (o.double() * w).sum().backward()
    (gdn_float64(*ref) * w).sum().backward()
    worst = 0.0
    for name, a, b in zip(names, ours, ref):
        err = ((a.grad.double() - b.grad).norm() / b.grad.norm()).item()
        print(f"  d{name:<5} relative error {err:.2e}")
        worst = max(worst, err)
    print(f"gradient check: max relative error {worst:.2e} "
          f"(tolerance {tolerance:.0e})")
    return worst


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--keys", type=int, default=32)
    p.add_argument("--tolerance", type=float, default=5e-2)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("train_tiny.py needs a CUDA GPU: lina's kernels run on "
                 "NVIDIA GPUs, and torch.cuda.is_available() is False here")
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    dev = torch.device("cuda")
    model = Model(vocab=2 * args.keys).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 3e-3, args.steps)

    # Random tokens, longer than a training sequence: several chunks.
    tokens = torch.randint(2 * args.keys, (4, 200), device=dev)
    if check_gradients(model, tokens, args.tolerance) > args.tolerance:
        sys.exit("gradient check failed")

    losses = []
    for step in range(1, args.steps + 1):
        tokens, targets = recall_batch(args.batch, args.pairs, args.keys, dev,
                                       gen)
        with torch.autocast("cuda", dtype=DT):
            logits = model(tokens)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == 1:
            answered = targets != -100
            accuracy = (logits.argmax(-1)[answered] == targets[answered])
            print(f"step {step:4d}  loss {loss.item():.3f}  "
                  f"recall {accuracy.float().mean().item():.2f}")
    first, last = (sum(x) / len(x) for x in (losses[:10], losses[-10:]))
    print(f"loss {first:.3f} -> {last:.3f}")
    if not last < 0.5 * first:
        sys.exit("the loss did not fall to half its starting value")


if __name__ == "__main__":
    main()
