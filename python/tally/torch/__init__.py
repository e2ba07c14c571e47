# SPDX-License-Identifier: BSD-3-Clause
"""tally for PyTorch: importing this module registers the
torch.distributed backend "tally".

    import tally.torch
    dist.init_process_group("tally")          # under torchrun
    model = DistributedDataParallel(model)
    model.register_comm_hook(tally.torch.HookState(),
                             tally.torch.allreduce_hook)

See docs/pytorch.md.
"""
from .process_group import ProcessGroupTally, register
from .hook import HookState, allreduce_hook
from .shared_grads import SharedGradients
from .local_sgd import LocalSGD, local_sgd_hook
from .launch import job_client, current

register()

__all__ = ["ProcessGroupTally", "HookState", "allreduce_hook",
           "SharedGradients", "LocalSGD", "local_sgd_hook", "job_client",
           "current", "register"]
