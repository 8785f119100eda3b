"""What every check does: call the learner's function safely, check what came back,
compare it with the reference and name the mistake it matches."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

PACKAGE = "pe_tutorial"


def described(value) -> str:
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if value is None:
        return "None"
    return f"a {type(value).__name__}"


def require_own_function(fn) -> None:
    """Fail unless ``fn`` is a function (not a value, a class or None) the learner wrote.

    One of the package's own functions (or a ``functools.partial`` of one) is
    named as such: importing the answer is not answering. Hidden tests call
    this too.
    """
    if isinstance(fn, type) or not callable(fn):
        raise AssertionError(
            f"the check needs your function itself, passed by name without calling "
            f"it (check_apply_rope(apply_rope), not check_apply_rope(apply_rope(x))); "
            f"it got {described(fn)}"
        )
    target = getattr(fn, "func", fn)  # functools.partial(package_function, ...)
    module = getattr(target, "__module__", None) or ""
    if module == PACKAGE or module.startswith(PACKAGE + "."):
        name = getattr(target, "__qualname__", getattr(target, "__name__", "?"))
        raise AssertionError(
            f"this is pe_tutorial's implementation ({module}.{name}), not yours: "
            "write the function yourself (the checks in pe_tutorial.checks are the "
            "only part of the package an answer may use)"
        )


def call_any(fn: Callable, what: str, *args, **kwargs):
    """``fn(*args, **kwargs)`` for ``fn`` the learner's own function; an exception or
    ``None`` fails the check, whatever else came back is returned as it is."""
    require_own_function(fn)
    try:
        out = fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (reported to the learner)
        raise AssertionError(
            f"{what} raised {type(error).__name__}: {error}"
        ) from error
    if out is None:
        raise AssertionError(
            f"{what} returned None: does the function end with a `return`?"
        )
    return out


def call(fn: Callable, what: str, *args, **kwargs) -> torch.Tensor:
    """``fn(*args, **kwargs)``; an exception, or anything but a tensor, fails the check.

    ``fn`` must be the learner's own function (``require_own_function``).
    """
    out = call_any(fn, what, *args, **kwargs)
    if not isinstance(out, torch.Tensor):
        kind = type(out)
        name = (
            kind.__name__
            if kind.__module__ == "builtins"
            else (f"{kind.__module__.split('.')[0]}.{kind.__name__}")
        )
        hint = (
            "torch.from_numpy(a)" if name.startswith("numpy") else "torch.tensor(...)"
        )
        raise AssertionError(
            f"{what} returned a {name}, not a torch.Tensor; build the result with "
            f"torch operations, or convert it at the end with {hint}"
        )
    return out


def call_checked(
    fn: Callable, what: str, *args, shape: Sequence[int], dtype: torch.dtype, **kwargs
) -> torch.Tensor:
    """``call``, then the shape and dtype of the tensor that came back."""
    out = call(fn, what, *args, **kwargs)
    check_shape(out, shape, what)
    check_dtype(out, dtype, what)
    return out


def call_keeping_inputs(fn: Callable, what: str, *args, **kwargs) -> torch.Tensor:
    """``call`` on clones of the tensor arguments, failing if ``fn`` wrote into one."""
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    out = call(fn, what, *copies, **kwargs)
    for original, copy in zip(args, copies):
        if isinstance(original, torch.Tensor) and not torch.equal(original, copy):
            raise AssertionError(
                f"{what} changed its input in place; leave the input as it was and "
                "return a new tensor (no x[...] = ..., x.mul_(...) or x.copy_(...))"
            )
    return out


def check_shape(out: torch.Tensor, shape: Sequence[int], what: str) -> None:
    if tuple(out.shape) != tuple(shape):
        raise AssertionError(
            f"{what} returned shape {tuple(out.shape)}, expected {tuple(shape)}"
        )


def check_dtype(out: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    if out.dtype != dtype:
        raise AssertionError(
            f"{what} returned {out.dtype}, expected {dtype}; compute in whatever "
            f"precision you like and convert the result with .to({dtype})"
        )


def close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float = 0.0) -> bool:
    return a.shape == b.shape and torch.allclose(
        a.double(), b.double(), atol=atol, rtol=rtol
    )


def first_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    """Where ``got`` is furthest from ``want``, or where it holds NaN or inf that ``want`` does not."""
    unexpected = ~torch.isfinite(got) & torch.isfinite(want)
    if unexpected.any():
        index = tuple(int(i) for i in torch.nonzero(unexpected)[0])
        count = int(unexpected.sum())
        more = f" ({count} entries in all)" if count > 1 else ""
        return (
            f"it holds {float(got[index])} at index {index}{more}, where "
            f"{float(want[index]):.6g} was expected: look for a division by zero, "
            "a log of zero or a power that overflows"
        )
    diff = (got.double() - want.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.zeros_like(diff), diff)
    index = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
    return (
        f"the largest difference is at index {index}: got "
        f"{float(got[index]):.6g}, expected {float(want[index]):.6g}"
    )


def diagnose(
    what: str,
    got: torch.Tensor,
    want: torch.Tensor,
    mistakes: Sequence[tuple[torch.Tensor, str]],
    atol: float,
    rtol: float = 0.0,
) -> None:
    """Raise with the first mistake ``got`` matches, or with its worst entry."""
    for candidate, message in mistakes:
        if close(got, candidate, atol, rtol):
            raise AssertionError(f"{what}: {message}")
    raise AssertionError(f"{what} is wrong; {first_difference(got, want)}")
