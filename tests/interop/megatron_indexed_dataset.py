"""megatron-core's megatron/core/datasets/indexed_dataset.py, loaded on its own.

Importing megatron.core runs its __init__, which pulls in parallel_state,
transformer and CUDA-side packages (and needs torch >= 2.6). The indexed
dataset module needs only numpy, torch and three small helpers of its
package: object_storage_utils, msc_utils and log_single_rank (from
megatron.core.utils, which is itself heavy, so it is stood in for by
_rank_utils, where the function lives). This registers megatron.core and
megatron.core.datasets as bare packages over the installed folders, so
those modules import without running __init__.
"""

import importlib
import os
import sys
import types


def _find_core():
    for entry in sys.path:
        core = os.path.join(entry or ".", "megatron", "core")
        if os.path.isfile(os.path.join(core, "datasets", "indexed_dataset.py")):
            return core
    raise ModuleNotFoundError(
        "megatron-core is not installed: pip install --no-deps megatron-core==0.16.1")


def load():
    """Returns the module megatron.core.datasets.indexed_dataset."""
    name = "megatron.core.datasets.indexed_dataset"
    if name in sys.modules:
        return sys.modules[name]
    core = _find_core()
    for package, path in (("megatron", os.path.dirname(core)), ("megatron.core", core),
                          ("megatron.core.datasets", os.path.join(core, "datasets"))):
        if package not in sys.modules:
            module = types.ModuleType(package)
            module.__path__ = [path]
            sys.modules[package] = module
    if "megatron.core.utils" not in sys.modules:
        utils = types.ModuleType("megatron.core.utils")
        utils.log_single_rank = importlib.import_module(
            "megatron.core._rank_utils").log_single_rank
        sys.modules["megatron.core.utils"] = utils
    return importlib.import_module(name)
