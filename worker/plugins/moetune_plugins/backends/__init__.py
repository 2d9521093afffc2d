"""The Python backends the plugin host serves, by name. A backend is an
object with:
  name, and probe(device) -> dict (ProbeReply's fields, snake_case);
  prepare(inputs, tile, device, cuda_graph) -> a state made once per
    workload (weights converted, buffers allocated);
  run(state) -> numpy float32 [batch, hidden], the layer's output;
  time(state, warmup, iterations) -> [microseconds per timed iteration].
  refuse_run(device) -> str, optional: why a run cannot start on this
    device ("" when it can), asked before the inputs are made.
A backend's module may not import its libraries at import time: its probe
says what is missing ("not installed: torch"). The serving stacks' runners
(stack_runners) follow, one backend per stacks.RUNNERS entry."""
from . import numpy_reference, stack_runners, torch_grouped

BACKENDS = {b.name: b for b in (numpy_reference.NumpyReference(),
                                torch_grouped.TorchGrouped("bf16"),
                                torch_grouped.TorchGrouped("fp8"),
                                *stack_runners.runners())}
