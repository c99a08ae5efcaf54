"""Checking tensors against a spec before anything reaches liblina.

Duck-typed (shape, dtype, device, is_contiguous/contiguous, float, long,
tolist, data_ptr) so that no torch is needed to run the checks: the tests use a small
stand-in tensor class. Every error is a ValueError that names the function,
the tensor and the shape it should have.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .spec import field_value

# str(tensor.dtype) -> the spec's dtype name.
SPEC_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "f16",
               "torch.float32": "f32"}
_FLOAT_DTYPES = ("torch.bfloat16", "torch.float16", "torch.float32",
                 "torch.float64")
_CU_SEQLENS_DTYPES = ("torch.int64", "torch.int32")


@dataclass
class Inputs:
    """The tensors of one call, checked and made contiguous; g, beta, A_log,
    dt_bias and initial_state are float32, cu_seqlens int64. ``None`` for the
    ones not used."""
    q: Any
    k: Any
    v: Any
    g: Any = None
    beta: Any = None
    a: Any = None
    b: Any = None
    A_log: Any = None
    dt_bias: Any = None
    initial_state: Any = None
    cu_seqlens: Any = None
    batch: int = 0
    seq_len: int = 0
    num_sequences: int = 0
    # Varlen: the longest sequence's length where the lengths are on the
    # host (a CPU cu_seqlens, or cu_seqlens_cpu), else 0 (not read from the
    # GPU: that would wait for the stream).
    longest: int = 0


def _shape(t) -> list[int]:
    return [int(d) for d in t.shape]


def _dims(names: str, values: list[int]) -> str:
    return f"[{names}] = {values}" if names else str(values)


class Checker:
    def __init__(self, where: str):
        self.where = where

    def fail(self, message: str):
        raise ValueError(f"{self.where}: {message}")

    def tensor(self, name: str, t) -> None:
        if t is None:
            self.fail(f"'{name}' is required")
        for attr in ("shape", "dtype", "device"):
            if not hasattr(t, attr):
                self.fail(f"'{name}' must be a torch.Tensor, got "
                          f"{type(t).__name__}")

    def cuda(self, name: str, t, device=None) -> None:
        if getattr(t.device, "type", None) != "cuda":
            self.fail(f"'{name}' must be on a CUDA device, got {t.device}")
        if device is not None and t.device != device:
            self.fail(f"'{name}' is on {t.device} but q is on {device}")

    def shape(self, name: str, t, names: str, expected: list[int]) -> None:
        if _shape(t) != list(expected):
            self.fail(f"'{name}' must have shape {_dims(names, list(expected))}, "
                      f"got {_shape(t)}")

    def floating(self, name: str, t) -> None:
        if str(t.dtype) not in _FLOAT_DTYPES:
            self.fail(f"'{name}' must be a floating-point tensor, got {t.dtype}")

    def unused(self, name: str, t, why: str) -> None:
        if t is not None:
            self.fail(f"'{name}' was given but {why}")


def head_dims(where: str, q, v) -> tuple[int, int, int, int, str]:
    """(K, V, H, HV, dtype) of a call, from q [B, T, H, K] and v [B, T, HV, V]."""
    c = Checker(where)
    c.tensor("q", q)
    c.tensor("v", v)
    if len(q.shape) != 4:
        c.fail(f"'q' must have 4 dimensions [B, T, H, K], got shape {_shape(q)}")
    if len(v.shape) != 4:
        c.fail(f"'v' must have 4 dimensions [B, T, HV, V], got shape {_shape(v)}")
    dtype = SPEC_DTYPES.get(str(q.dtype))
    if dtype is None:
        c.fail(f"'q' must be bfloat16, float16 or float32, got {q.dtype}")
    H, K = int(q.shape[2]), int(q.shape[3])
    HV, V = int(v.shape[2]), int(v.shape[3])
    if H == 0 or HV % H != 0:
        c.fail(f"v's heads HV = {HV} must be a multiple of q's heads H = {H} "
               "(grouped value heads)")
    return K, V, H, HV, dtype


def _check_cu_seqlens_values(c: Checker, name: str, values: list[int],
                             T: int) -> None:
    if values[0] != 0:
        c.fail(f"'{name}' must start at 0, got {values[0]}")
    if values[-1] != T:
        c.fail(f"'{name}' must end at T = {T}, got {values[-1]}")
    for i in range(1, len(values)):
        if values[i] < values[i - 1]:
            c.fail(f"'{name}' must be non-decreasing, but {name}[{i}] = "
                   f"{values[i]} < {name}[{i - 1}] = {values[i - 1]}")


def check_inputs(where: str, fields: Mapping[str, Any], *, q, k, v, g=None,
                 beta=None, a=None, b=None, A_log=None, dt_bias=None,
                 initial_state=None, cu_seqlens=None,
                 cu_seqlens_cpu=None, read_values=True) -> Inputs:
    """Checks a call against the spec ``fields`` (see spec.FIELDS).

    cu_seqlens is checked on the host (start 0, end T, non-decreasing) when it
    is on the CPU or when ``cu_seqlens_cpu`` is given; a CUDA cu_seqlens alone
    is trusted (checking it would synchronize the stream).
    ``read_values=False`` reads no values at all (a backward's second look
    at inputs its forward checked: their values may be on the GPU or be
    fake tensors being traced)."""
    c = Checker(where)
    K, V = fields["key_dim"], fields["value_dim"]
    H, HV = fields["heads"], fields["value_heads"]
    dtype = fields["dtype"]
    decay, update = fields["decay"], fields["update"]
    gate, beta_kind = field_value(fields, "gate"), field_value(fields, "beta")

    c.tensor("q", q)
    c.cuda("q", q)
    device = q.device
    if len(q.shape) != 4:
        c.fail(f"'q' must have 4 dimensions [B, T, H, K], got shape {_shape(q)}")
    B, T = int(q.shape[0]), int(q.shape[1])
    for name, t in (("q", q), ("k", k), ("v", v)):
        c.tensor(name, t)
        c.cuda(name, t, device)
        if SPEC_DTYPES.get(str(t.dtype)) != dtype:
            c.fail(f"'{name}' has dtype {t.dtype} but the spec's dtype is "
                   f"{dtype} (q, k and v must share it)")
    c.shape("q", q, "B, T, H, K", [B, T, H, K])
    c.shape("k", k, "B, T, H, K", [B, T, H, K])
    c.shape("v", v, "B, T, HV, V", [B, T, HV, V])

    def float_input(name, t, names, shape):
        c.tensor(name, t)
        c.cuda(name, t, device)
        c.floating(name, t)
        c.shape(name, t, names, shape)
        return t.float().contiguous()

    out = Inputs(q=q.contiguous(), k=k.contiguous(), v=v.contiguous())

    if decay == "none":
        c.unused("g", g, "the spec has decay = none")
    elif decay == "fixed":
        out.g = float_input("g", g, "HV", [HV])
    elif decay == "scalar":
        out.g = float_input("g", g, "B, T, HV", [B, T, HV])
    else:
        out.g = float_input("g", g, "B, T, HV, K", [B, T, HV, K])

    if beta_kind == "none":
        c.unused("beta", beta, "the spec has beta = none")
    else:
        out.beta = float_input("beta", beta, "B, T, HV", [B, T, HV])

    for name, t in (("a", a), ("b", b)):
        used = (update == "dplr"
                and field_value(fields, "low_rank_" + name) == "input")
        if not used:
            c.unused(name, t, f"the spec does not read it (update = {update}, "
                     f"low_rank_{name} = {field_value(fields, 'low_rank_' + name)})")
            continue
        c.tensor(name, t)
        c.cuda(name, t, device)
        if str(t.dtype) != str(q.dtype):
            c.fail(f"'{name}' has dtype {t.dtype} but q has {q.dtype}")
        c.shape(name, t, "B, T, HV, K", [B, T, HV, K])
        setattr(out, name, t.contiguous())

    if gate == "given":
        c.unused("A_log", A_log, "the gate is not computed in the kernel "
                 "(gate = given)")
        c.unused("dt_bias", dt_bias, "the gate is not computed in the kernel "
                 "(gate = given)")
    else:
        out.A_log = float_input("A_log", A_log, "HV", [HV])
        if dt_bias is not None:
            c.tensor("dt_bias", dt_bias)
            if decay == "per_channel" and _shape(dt_bias) == [HV * K]:
                expected, names = [HV * K], "HV * K"
            elif decay == "per_channel":
                expected, names = [HV, K], "HV, K"
            else:
                expected, names = [HV], "HV"
            out.dt_bias = float_input("dt_bias", dt_bias, names, expected)

    varlen = field_value(fields, "varlen")
    N = B
    if not varlen:
        c.unused("cu_seqlens", cu_seqlens, "the spec is not varlen")
    else:
        c.tensor("cu_seqlens", cu_seqlens)
        if str(cu_seqlens.dtype) not in _CU_SEQLENS_DTYPES:
            c.fail(f"'cu_seqlens' must be int64 or int32 (torch.long or "
                   f"torch.int), got {cu_seqlens.dtype}")
        if len(cu_seqlens.shape) != 1 or int(cu_seqlens.shape[0]) < 2:
            c.fail("'cu_seqlens' must have shape [N + 1] with N >= 1, got "
                   f"{_shape(cu_seqlens)}")
        if B != 1:
            c.fail(f"with cu_seqlens the batch size must be 1 (sequences are "
                   f"packed along T), got B = {B}")
        on_host = getattr(cu_seqlens.device, "type", None) == "cpu"
        if not on_host:
            c.cuda("cu_seqlens", cu_seqlens, device)
        N = int(cu_seqlens.shape[0]) - 1
        host_values = None
        if on_host and read_values:
            host_values = cu_seqlens.tolist()
            _check_cu_seqlens_values(c, "cu_seqlens", host_values, T)
        if cu_seqlens_cpu is not None and read_values:
            if _shape(cu_seqlens_cpu) != [N + 1]:
                c.fail(f"'cu_seqlens_cpu' must have shape {[N + 1]} like "
                       f"cu_seqlens, got {_shape(cu_seqlens_cpu)}")
            host_values = cu_seqlens_cpu.tolist()
            _check_cu_seqlens_values(c, "cu_seqlens_cpu", host_values, T)
        if host_values is not None:
            out.longest = max(int(e) - int(s)
                              for s, e in zip(host_values, host_values[1:]))
        # liblina reads int64: an int32 cu_seqlens (an engine's
        # query_start_loc) is converted where it is, on the stream, without
        # waiting for it.
        if str(cu_seqlens.dtype) != "torch.int64":
            cu_seqlens = cu_seqlens.long()
        out.cu_seqlens = cu_seqlens.contiguous()

    if field_value(fields, "initial_state"):
        out.initial_state = float_input("initial_state", initial_state,
                                        "N, HV, K, V", [N, HV, K, V])
    else:
        c.unused("initial_state", initial_state,
                 "the spec has initial_state = false")

    out.batch, out.seq_len, out.num_sequences = B, T, N
    return out


def check_output(where: str, name: str, t, shape: list[int], dtype: str,
                 device) -> None:
    """A caller-provided output: right shape, dtype and device, contiguous
    (an output is never silently copied)."""
    c = Checker(where)
    c.tensor(name, t)
    c.cuda(name, t, device)
    if str(t.dtype) != dtype:
        c.fail(f"'{name}' must have dtype {dtype}, got {t.dtype}")
    c.shape(name, t, "", shape)
    if not t.is_contiguous():
        c.fail(f"'{name}' must be contiguous (outputs are written in place)")
