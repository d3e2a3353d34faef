"""The model whose module calls benches/module_call_cost.py times and
benches/module_call_instructions.py counts: 60 blocks of Linear(16, 16) + ReLU, 181 module calls
a step (the Sequential, 60 blocks, their 120 layers), compute tiny, so that memprof's share of a
step is large. `junk`: a tensor each block writes to before its layers (module_call_cost.py's
--sweep, evicting the caches between module calls as a GPU step's libraries do)."""
import torch


class Block(torch.nn.Module):
    def __init__(self, junk=None):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.relu = torch.nn.ReLU()
        self.junk = junk

    def forward(self, x):
        if self.junk is not None:
            self.junk.add_(1.0)
        return self.relu(self.linear(x))


def build(junk=None):
    """The model, its input, and its module calls a step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(junk) for _ in range(60)])
    return model, torch.randn(4, 16), sum(1 for _ in model.modules())

