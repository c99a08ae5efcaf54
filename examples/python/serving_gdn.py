"""A Gated DeltaNet layer served the way vLLM serves Qwen3-Next, on lina:

1. prefill of four prompts of different lengths, packed with cu_seqlens,
   gates computed in the kernel (-exp(A_log) softplus(a + dt_bias), beta =
   sigmoid(b));
2. each request's state moved into a slot of a state pool in vLLM's
   [slots, HV, V, K] order;
3. three decode steps of one token per request, replayed from a CUDA graph
   (packed tokens, a slot per request, the pool updated in place);
4. two speculative steps of three draft tokens per request: each token's
   state kept in the request's row of slots, the second step continuing
   from the prefix the first step's verification accepted.

Every output and every state is checked against the same layer in float64
(torch, token by token). Prints the errors; exits 1 on a mismatch.

    PYTHONPATH=python python3 examples/python/serving_gdn.py

Needs a CUDA GPU, torch, and liblina.so (build/lib or dist/lib, or
$LINA_LIBRARY).
"""
import sys

import torch
import torch.nn.functional as F

import lina

D, H, HV, K, V = 512, 2, 4, 128, 128  # hidden size, heads, value heads
PROMPTS = [37, 5, 64, 20]             # prompt lengths of the 4 requests
DRAFTS = 3                            # draft tokens per speculative step
TOL = 3e-2                            # bf16 projections vs float64
dev, dt = "cuda", torch.bfloat16


class GatedDeltaNet(torch.nn.Module):
    """Projections in bf16 around lina's recurrence (fp32 state)."""

    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(D, H * K, bias=False)
        self.k = torch.nn.Linear(D, H * K, bias=False)
        self.v = torch.nn.Linear(D, HV * V, bias=False)
        self.a = torch.nn.Linear(D, HV, bias=False)  # gate pre-activation
        self.b = torch.nn.Linear(D, HV, bias=False)  # beta logits
        self.o = torch.nn.Linear(HV * V, D, bias=False)
        self.A_log = torch.nn.Parameter(torch.empty(HV).uniform_(1, 16).log())
        self.dt_bias = torch.nn.Parameter(torch.rand(HV) - 0.5)

    def inputs(self, x):
        """x [tokens, D] -> lina's packed [1, tokens, ...] tensors."""
        n = x.shape[0]
        return dict(q=self.q(x).view(1, n, H, K), k=self.k(x).view(1, n, H, K),
                    v=self.v(x).view(1, n, HV, V),
                    g=self.a(x).float().view(1, n, HV),
                    beta=self.b(x).float().view(1, n, HV),
                    A_log=self.A_log.float(), dt_bias=self.dt_bias.float(),
                    use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                    use_qk_l2norm_in_kernel=True)

    def prefill(self, x, cu_seqlens):
        """(y [tokens, D], final states [N, HV, K, V])."""
        o, ht = lina.chunk_gated_delta_rule(
            **self.inputs(x), cu_seqlens=cu_seqlens, output_final_state=True)
        return self.o(o.reshape(x.shape[0], HV * V)), ht

    def decode(self, x, cu_seqlens, pool, slots, accepted=None):
        """y [tokens, D]; the pool [slots, HV, V, K] updated in place."""
        o, _ = lina.fused_recurrent_gated_delta_rule(
            **self.inputs(x), cu_seqlens=cu_seqlens, initial_state=pool,
            state_v_first=True, ssm_state_indices=slots,
            num_accepted_tokens=accepted, inplace_final_state=True)
        return self.o(o.reshape(x.shape[0], HV * V))


class Reference:
    """The layer in float64, one token at a time."""

    def __init__(self, layer):
        self.w = {n: p.detach().double() for n, p in layer.named_parameters()}

    def run(self, S, x):
        """Tokens x [T, D] from state S [HV, K, V]: (y [T, D], the state
        after each token)."""
        w, x = self.w, x.double()
        q = (x @ w["q.weight"].T).view(-1, H, K).repeat_interleave(HV // H, 1)
        k = (x @ w["k.weight"].T).view(-1, H, K).repeat_interleave(HV // H, 1)
        v = (x @ w["v.weight"].T).view(-1, HV, V)
        g = -w["A_log"].exp() * F.softplus(x @ w["a.weight"].T + w["dt_bias"])
        beta = (x @ w["b.weight"].T).sigmoid()
        q = q / (q.square().sum(-1, keepdim=True) + 1e-6).sqrt() * K ** -0.5
        k = k / (k.square().sum(-1, keepdim=True) + 1e-6).sqrt()
        outs, states = [], []
        for t in range(x.shape[0]):
            S = S * g[t].exp()[:, None, None]
            u = beta[t][:, None] * (v[t] - torch.einsum("hk,hkv->hv", k[t], S))
            S = S + k[t][:, :, None] * u[:, None, :]
            outs.append(torch.einsum("hk,hkv->hv", q[t], S).reshape(HV * V))
            states.append(S)
        return torch.stack(outs) @ w["o.weight"].T, states


def rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


failures = []


def check(what, x, ref):
    err = rel(x, ref)
    ok = err < TOL
    print(f"  {what:<44} {err:.2e}  {'ok' if ok else 'MISMATCH'}")
    if not ok:
        failures.append(what)


def vk(state):
    """A [.., K, V] state in the pool's [.., V, K] order."""
    return state.transpose(-1, -2)


def main():
    torch.manual_seed(0)
    layer = GatedDeltaNet().to(dev, dt)
    layer.A_log.data = layer.A_log.data.float()
    layer.dt_bias.data = layer.dt_bias.data.float()
    ref = Reference(layer)
    N = len(PROMPTS)
    zero = torch.zeros(HV, K, V, dtype=torch.float64, device=dev)

    def tokens(n):
        return torch.randn(n, D, device=dev, dtype=dt)

    # Request n keeps a row of DRAFTS slots, rows[n]; its state between
    # steps is in the first. Slots 3, 7, 11 and 15 are nobody's.
    pool = torch.zeros(4 * N, HV, V, K, device=dev)
    rows = torch.arange(4 * N, device=dev, dtype=torch.int32).view(N, 4)
    rows = rows[:, :DRAFTS].contiguous()
    first = rows[:, 0].contiguous()

    with torch.no_grad():
        print("prefill (varlen, gates computed in the kernel)")
        x = tokens(sum(PROMPTS))
        offsets = [0]
        for n in PROMPTS:
            offsets.append(offsets[-1] + n)
        cu = torch.tensor(offsets, dtype=torch.int32, device=dev)
        y, ht = layer.prefill(x, cu)
        states = []
        for n in range(N):
            y_ref, s = ref.run(zero, x[offsets[n]:offsets[n + 1]])
            check(f"request {n}: {PROMPTS[n]} tokens, output", y[
                offsets[n]:offsets[n + 1]], y_ref)
            states.append(s[-1])
        check("final states", ht, torch.stack(states))
        pool[first.long()] = vk(ht)

        print("decode, one token per request, from a CUDA graph")
        static_x = tokens(N)
        step_cu = torch.arange(N + 1, dtype=torch.int32, device=dev)
        layer.decode(static_x, step_cu, pool.clone(), first)  # compile
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = layer.decode(static_x, step_cu, pool, first)
        for step in range(3):
            static_x.copy_(tokens(N))
            graph.replay()
            y_ref = []
            for n in range(N):
                yn, s = ref.run(states[n], static_x[n:n + 1])
                y_ref.append(yn)
                states[n] = s[-1]
            check(f"step {step}: outputs", static_y, torch.cat(y_ref))
        check("pool after the graph steps", vk(pool[first.long()]),
              torch.stack(states))

        print(f"speculative decoding, {DRAFTS} draft tokens per request")
        cu = torch.arange(0, DRAFTS * (N + 1), DRAFTS, dtype=torch.int32,
                          device=dev)
        accepted = torch.ones(N, dtype=torch.int32, device=dev)
        for step, verified in enumerate(([1, 3, 2, 2], [2, 1, 3, 1])):
            x = tokens(N * DRAFTS)
            y = layer.decode(x, cu, pool, rows, accepted)
            drafts = []
            for n in range(N):
                xn = x[n * DRAFTS:(n + 1) * DRAFTS]
                y_ref, s = ref.run(states[n], xn)
                check(f"step {step}: request {n} drafts, output",
                      y[n * DRAFTS:(n + 1) * DRAFTS], y_ref)
                check(f"step {step}: request {n} draft states",
                      vk(pool[rows[n].long()]), torch.stack(s))
                drafts.append(s)
            # Verification accepted this many of each request's drafts: the
            # next step starts from the state after them.
            for n, a in enumerate(verified):
                states[n] = drafts[n][a - 1]
            accepted = torch.tensor(verified, dtype=torch.int32, device=dev)
        unused = pool[3::4]
        print(f"  {'slots no call names, still zero':<44} "
              f"{'ok' if not unused.any() else 'MISMATCH'}")
        if unused.any():
            failures.append("unused slots")

    if failures:
        print(f"{len(failures)} mismatches")
        sys.exit(1)
    print("all match the float64 layer")


if __name__ == "__main__":
    main()
