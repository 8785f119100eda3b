"""Where a training step's time goes, per position scheme: ``torch.profiler`` (chapters 9, 10).

Chapter 9 times one training step of its quick model per scheme (the
``train_step`` suite) and a RoPE step takes longer than a NoPE one; this module
says what the extra time is made of. ``profile_train_step`` builds the same
models and the same step (``train_step.quick_model``, ``train_step.train_step_fn``:
forward, next-byte cross-entropy, backward; no optimiser unless asked), warms
each up, then runs a few steps under ``torch.profiler.profile`` (CPU
activities, CUDA too on a GPU) and splits the step's time into groups.

How an op finds its group, using only what the profiler records and ranges
opened from here (``pe_tutorial.attention`` and ``pe_tutorial.lm`` are not
touched):

- Forward: module hooks open a ``record_function`` range around each module of
  the model (the attention layer, its q/k/v and output projections, the MLP,
  the LayerNorms, each block, the embedding and the model itself), and the
  position scheme's methods (``add_to_input``, ``rotate``, ``bias``,
  ``value_term``, ``score_mod``) and the model's input table are wrapped in a
  ``position`` range for the duration of the profile. An op takes the label of
  its innermost range, except that anything under a ``position`` range is
  ``position`` (a norm or a linear layer a scheme owns is the scheme's work).
- Backward: the autograd engine runs each node inside an
  ``autograd::engine::evaluate_function: <Node>`` event carrying the node's
  sequence number, the same number the forward op that made the node carries;
  the node, and every op under it, takes that forward op's group.
  ``AccumulateGrad`` nodes (adding into ``.grad``) are ``param grads``.
- ``autograd engine``: time inside ``backward()`` outside every node (the
  engine's scheduling, the seed gradient of the loss).
- ``optimizer``: everything in the optimiser's range (only with
  ``optimizer=True``: the ``train_step`` suite times no optimiser step).
- ``other``: what no range claims: the step's own Python around the model
  call (counted with the forward pass), backward nodes whose forward op is
  unknown.

The ranges cost time of their own, counted in their group: NoPE's scheme
methods do nothing, so its ``position`` group holds only that cost (no op;
``SchemeProfile.ops`` counts them), and it is subtracted away in the
difference from NoPE. Before the profiled steps, each model runs ``warmup``
steps inside a profile that is thrown away, so the first scheme does not pay
for starting the profiler. The schemes then take turns, one profiled step
each per round, and each scheme's table is its median step (by total time):
a step that another process interrupted does not decide the breakdown, and
the groups of the step shown still add up to its total.

Times are self times (an op's time minus its children's), so every op counts
once and the groups add up to the profiled step (CPU). The profiler slows
every op by a similar amount, so a profiled step is longer than the timed one;
the shares, not the milliseconds, are what carries over. On a GPU the
kernels' device time is grouped the same way (through the CPU op that
launched them). There the backward pass runs on the autograd engine's own
thread: its ops are grouped the same way, while the main thread's wait for
them counts as ``autograd engine``, so the CPU groups can add up to more than
the step (checked on CPUs only so far).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from .._validation import require_non_negative_int, require_positive_int
from ..attention.core import MultiHeadAttention
from ..attention.position_scheme import PositionScheme
from ..devices import synchronize
from ..memory import quiet_stderr
from ._core import Plan, Suite, register
from .step_profile_results import (
    GROUPS,
    PHASES,
    SchemeProfile,
    StepProfile,
    merge_profile_settings,
    merge_profiles,
)
from .train_step import QUICK_MODEL, quick_model, train_step, train_step_sizes

__all__ = [
    "GROUPS",
    "PHASES",
    "SchemeProfile",
    "StepProfile",
    "merge_profiles",
    "labelled",
    "profiled_step",
    "attribute",
    "profile_train_step",
    "train_step_profile",
    "recorded_profile",
]

# names of the ranges opened here; nothing else in torch starts with this
PREFIX = "pe_profile::"
STEP = PREFIX + "step"
PHASE = PREFIX + "phase::"
LABEL = PREFIX + "group::"
EVALUATE = "autograd::engine::evaluate_function: "
# the scheme's methods that hold its work (PositionScheme)
SCHEME_METHODS = ("add_to_input", "rotate", "bias", "value_term", "score_mod")


# ---------------------------------------------------------------------------
# labelling the model: ranges opened from hooks, removed afterwards
# ---------------------------------------------------------------------------


def _module_groups(model: nn.Module) -> dict[nn.Module, str]:
    """The group of each module that gets a range; schemes are handled apart."""
    groups: dict[nn.Module, str] = {model: "embedding & output"}
    table = getattr(model, "input_table", None)
    if isinstance(table, nn.Module):
        groups[table] = "position"
    parents = {
        child: parent for parent in model.modules() for child in parent.children()
    }
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        parent = parents.get(module)
        if module in groups or isinstance(module, PositionScheme):
            continue
        if isinstance(module, MultiHeadAttention):
            groups[module] = "attention"
        elif isinstance(module, nn.Linear) and isinstance(parent, MultiHeadAttention):
            groups[module] = "attention projections"
        elif leaf == "mlp":
            groups[module] = "mlp"
        elif isinstance(module, nn.LayerNorm):
            groups[module] = "norm"
        elif isinstance(module, nn.Embedding) and leaf == "embed":
            groups[module] = "embedding & output"
        elif parent is getattr(model, "blocks", None):
            # a block's own ops: the residual additions around attention and MLP
            groups[module] = "residual"
    return groups


def _in_range(label: str, method):
    def wrapped(*args, **kwargs):
        with record_function(LABEL + label):
            return method(*args, **kwargs)

    return wrapped


@contextlib.contextmanager
def labelled(model: nn.Module) -> Iterator[None]:
    """Open a ``record_function`` range per group around the model's parts while inside.

    Forward pre-hooks open a module's range and forward hooks close it; each
    position scheme's methods are replaced, on that instance only, by ones
    that run inside a ``position`` range. Everything is undone on exit.
    """
    handles, wrapped, stack = [], [], []

    def opener(label):
        def hook(module, args):
            context = record_function(LABEL + label)
            context.__enter__()
            stack.append(context)

        return hook

    def closer(module, args, output):
        stack.pop().__exit__(None, None, None)

    try:
        for module, label in _module_groups(model).items():
            handles.append(module.register_forward_pre_hook(opener(label)))
            handles.append(module.register_forward_hook(closer, always_call=True))
        for module in model.modules():
            if isinstance(module, PositionScheme):
                for name in SCHEME_METHODS:
                    method = getattr(module, name, None)
                    if method is not None:
                        # an instance attribute shadows the class's method
                        object.__setattr__(module, name, _in_range("position", method))
                        wrapped.append((module, name))
        yield
    finally:
        for handle in handles:
            handle.remove()
        for module, name in wrapped:
            object.__delattr__(module, name)


def profiled_step(model: nn.Module, tokens: torch.Tensor, optimizer=None):
    """``train_step_fn(model, tokens)`` with its phases in ranges (and an optimiser step).

    The same calls as the ``train_step`` suite's step: the forward pass and the
    loss in ``forward``, ``loss.backward()`` in ``backward``; with an optimiser,
    its step and ``zero_grad`` in ``optimizer``.
    """

    def step():
        with record_function(STEP):
            with record_function(PHASE + "forward"):
                logits = model(tokens[:, :-1])
                with record_function(LABEL + "loss"):
                    loss = nn.functional.cross_entropy(
                        logits.flatten(0, 1), tokens[:, 1:].flatten()
                    )
            with record_function(PHASE + "backward"):
                loss.backward()
            if optimizer is not None:
                with record_function(PHASE + "optimizer"):
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

    return step


# ---------------------------------------------------------------------------
# from profiler events to groups
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Attributed:
    """One profiler event inside a step, with the phase and group it counts in."""

    name: str
    phase: str
    group: str
    self_cpu_us: float
    self_device_us: float


def _chain(event) -> list:
    """``event`` and its CPU ancestors, innermost first."""
    chain = []
    while event is not None:
        chain.append(event)
        event = event.cpu_parent
    return chain


def _forward_group(chain) -> str:
    labels = [e.name[len(LABEL) :] for e in chain if e.name.startswith(LABEL)]
    if "position" in labels:
        return "position"
    return labels[0] if labels else "other"


def attribute(events) -> tuple[list[Attributed], float, int]:
    """Each CPU event inside a profiled step with its phase and group (see the module).

    Returns the attributed events, the steps' total CPU time in microseconds
    (the ``step`` ranges' total) and the number of steps. Events outside every
    step (the profiler's own, warm-up leftovers) are left out; events of
    another thread (the autograd engine's device thread on a GPU) count when
    they start inside a step.
    """
    cpu = [e for e in events if e.device_type == DeviceType.CPU and not e.is_async]
    cpu.sort(key=lambda e: e.time_range.start)
    steps = [e for e in cpu if e.name == STEP]
    if not steps:
        raise ValueError(
            "no profiled step among these events: run the step from "
            "profiled_step() inside torch.profiler.profile"
        )
    threads = {e.thread for e in steps}
    context = []
    for event in cpu:
        chain = _chain(event)
        if not any(e.name == STEP for e in chain):
            # the autograd engine's own thread (a GPU's backward pass): its events
            # count when they run inside a step on the step's thread
            inside = any(
                s.time_range.start <= event.time_range.start <= s.time_range.end
                for s in steps
            )
            if event.thread in threads or not inside:
                continue
        phases = [e.name[len(PHASE) :] for e in chain if e.name.startswith(PHASE)]
        node = next((e for e in chain if e.name.startswith(EVALUATE)), None)
        if not phases:
            phases = ["other" if event.thread in threads else "backward"]
        context.append((event, chain, phases[0], node))
    # the group of each forward op that made an autograd node, by sequence number:
    # the node's maker is the last op to start with that number (the counter
    # moves on once a node is made; later ops with the number are its children)
    made_by: dict[int, str] = {}
    for event, chain, phase, _node in context:
        if phase == "forward" and event.sequence_nr >= 0:
            made_by[event.sequence_nr] = _forward_group(chain)
    out = []
    for event, chain, phase, node in context:
        if phase == "optimizer":
            group = "optimizer"
        elif node is not None:
            phase = "backward"
            if "AccumulateGrad" in node.name:
                group = "param grads"
            else:
                group = made_by.get(node.sequence_nr, "other")
        elif phase == "forward":
            group = _forward_group(chain)
        elif phase == "backward":
            group = "autograd engine"
        else:
            group = "other"
        if phase not in PHASES:
            phase = "forward"
        out.append(
            Attributed(
                event.name,
                phase,
                group,
                event.self_cpu_time_total,
                getattr(event, "self_device_time_total", 0.0) or 0.0,
            )
        )
    total = sum(e.cpu_time_total for e in steps)
    return out, total, len(steps)


# ---------------------------------------------------------------------------
# the measurement
# ---------------------------------------------------------------------------


def _summarise(scheme: str, attributed, total_us: float, steps: int) -> SchemeProfile:
    ms: dict[str, dict[str, float]] = {}
    device_ms: dict[str, dict[str, float]] = {}
    ops: dict[str, float] = {}
    for a in attributed:
        if not a.name.startswith(PREFIX):
            ops[a.group] = ops.get(a.group, 0) + 1 / steps
        phases = ms.setdefault(a.group, {})
        phases[a.phase] = phases.get(a.phase, 0.0) + a.self_cpu_us / 1000 / steps
        if a.self_device_us:
            phases = device_ms.setdefault(a.group, {})
            phases[a.phase] = phases.get(a.phase, 0.0) + a.self_device_us / 1000 / steps
    return SchemeProfile(scheme, steps, total_us / 1000 / steps, ms, device_ms, ops)


def _median_step(profiles: list[SchemeProfile]) -> SchemeProfile:
    """The median step of one scheme (the lower middle of an even count)."""
    ordered = sorted(profiles, key=lambda p: p.step_ms)
    median = ordered[(len(ordered) - 1) // 2]
    median.steps = len(profiles)
    median.step_ms_all = [p.step_ms for p in profiles]
    return median


def profile_train_step(
    device: torch.device | str = "cpu",
    *,
    batch: int | None = None,
    seq_len: int | None = None,
    schemes: tuple[str, ...] | None = None,
    steps: int = 5,
    warmup: int = 2,
    optimizer: bool = False,
    seed: int = 0,
    model: dict | None = None,
) -> StepProfile:
    """Profile ``steps`` warm training steps of chapter 9's quick model per scheme.

    Each scheme's result is its median step (see the module docstring).

    The sizes and schemes default to the ``train_step`` suite's (every scheme
    of ``lm.model.SCHEMES``; batch 16 of 64 bytes on a CPU, 64 of 256 on a
    GPU). ``warmup`` steps run first, in a profile thrown away (the first
    calls allocate and pick kernels; the profiler starts up). ``optimizer=True`` adds an AdamW step and ``zero_grad`` to
    each step (the suite times none). ``model`` overrides ``QUICK_MODEL``'s
    sizes (a test's tiny model). Models and tokens come from ``seed``; the
    global random state is left as it was. The first scheme is the reference
    the tables subtract (NoPE in the suite's order).
    """
    from ..lm.model import SCHEMES, ByteTransformer, ModelConfig

    device = torch.device(device)
    require_positive_int(steps, "steps")
    require_non_negative_int(warmup, "warmup")
    batch, seq_len = train_step_sizes(device, batch, seq_len)
    for name, size in (("batch", batch), ("seq_len", seq_len)):
        require_positive_int(size, name)
    schemes = tuple(SCHEMES) if schemes is None else tuple(schemes)
    if not schemes:
        raise ValueError("give at least one scheme to profile")
    if len(set(schemes)) != len(schemes):
        raise ValueError(f"each scheme once, please; got {schemes}")
    sizes = dict(QUICK_MODEL) if model is None else dict(model)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    runs = {}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        tokens = torch.randint(0, 256, (batch, seq_len + 1), device=device)
        for scheme in schemes:
            if model is None:
                net = quick_model(scheme, seq_len, device)
            else:
                config = ModelConfig(scheme=scheme, max_positions=seq_len, **sizes)
                net = ByteTransformer(config).to(device)
            adam = torch.optim.AdamW(net.parameters()) if optimizer else None
            step = profiled_step(net, tokens, adam)
            # the same calls as the suite's step, warmed up under a profile thrown
            # away: the profiler's start-up is not the first scheme's
            with labelled(net), quiet_stderr(), profile(activities=activities):
                for _ in range(warmup):
                    step()
                synchronize(device)
            runs[scheme] = (net, step, [])
        # the schemes take turns, so a slow spell of the machine hits them alike
        for _ in range(steps):
            for scheme, (net, step, profiles) in runs.items():
                with (
                    labelled(net),
                    quiet_stderr(),
                    profile(activities=activities) as prof,
                ):
                    step()
                    synchronize(device)
                attributed, total_us, counted = attribute(prof.events())
                profiles.append(_summarise(scheme, attributed, total_us, counted))
    results = [_median_step(profiles) for _, _, profiles in runs.values()]
    settings = {
        "batch": batch,
        "seq_len": seq_len,
        "model": sizes,
        "steps": steps,
        "warmup": warmup,
        "optimizer": optimizer,
    }
    return StepProfile(str(device), settings, results, reference=schemes[0])


# ---------------------------------------------------------------------------
# the suite: train_step's rows, timed without the profiler, and the profile
# ---------------------------------------------------------------------------


def train_step_profile(
    device: torch.device,
    dtype: torch.dtype,
    *,
    batch: int | None = None,
    seq_len: int | None = None,
    schemes: tuple[str, ...] | None = None,
    profile_steps: int = 15,
    profile_warmup: int = 2,
) -> Plan:
    """The ``train_step`` suite's rows, timed as there, then profiled (chapters 9, 10).

    The rows are each scheme's step timed without the profiler (``bench.measure``);
    the report (``report``) then runs ``profile_train_step`` on the same sizes and
    prints one table per scheme under them: milliseconds per step and share by
    group, forward and backward apart, and the difference from the first scheme
    (NoPE). The profile is kept in the result's ``settings["profile"]``
    (``StepProfile.from_dict`` reads it back).
    """
    from ..lm.model import SCHEMES

    for name, value, least in (
        ("profile_steps", profile_steps, 1),
        ("profile_warmup", profile_warmup, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    schemes = tuple(SCHEMES) if schemes is None else tuple(schemes)
    plan = train_step(device, dtype, batch=batch, seq_len=seq_len, schemes=schemes)
    plan.settings.update(
        schemes=list(schemes),
        profile_steps=profile_steps,
        profile_warmup=profile_warmup,
    )
    return plan


def report(result) -> list[str]:
    """Profile the run's steps and return the tables (``Suite.report``).

    A run that holds its profile already, recorded or merged from several
    processes (``merge_profile_settings``), has it printed, not measured again:
    a recorded run's table is computed afresh each time it is shown
    (``SuiteResult.printed_notes``)."""
    settings = result.settings
    if "profile" in settings:  # profiled already: a recorded or merged run
        processes = result.environment.get("processes", 1)
        where = f", in each of the {processes} processes" if processes > 1 else ""
        return [
            f"under torch.profiler{where} (self time by group; a profiled step runs "
            "slower than the timed rows above, the shares carry over):",
            *StepProfile.from_dict(settings["profile"]).table_lines(),
        ]
    profiled = profile_train_step(
        result.environment["device"],
        batch=settings["batch"],
        seq_len=settings["seq_len"],
        schemes=tuple(settings["schemes"]),
        steps=settings["profile_steps"],
        warmup=settings["profile_warmup"],
    )
    settings["profile"] = profiled.to_dict()
    return [
        "under torch.profiler (self time by group; a profiled step runs slower than "
        "the timed rows above, the shares carry over):",
        *profiled.table_lines(),
    ]


def recorded_profile(result) -> StepProfile:
    """The ``StepProfile`` kept in a ``train_step_profile`` result (a recorded run)."""
    if "profile" not in result.settings:
        raise ValueError(
            f"suite {result.suite!r}'s result holds no profile; run the "
            "train_step_profile suite"
        )
    return StepProfile.from_dict(result.settings["profile"])


register(
    Suite(
        "train_step_profile",
        "10",
        "a training step per scheme, profiled by group",
        train_step_profile,
        report=report,
        why="train_step's model and batch, under torch.profiler",
        smoke={
            "batch": 2,
            "seq_len": 8,
            "schemes": ("nope", "rope"),
            "profile_steps": 1,
            "profile_warmup": 1,
        },
        warmup=2,
        merge_settings=merge_profile_settings,
    )
)
