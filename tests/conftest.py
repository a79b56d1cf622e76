import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _few_threads():
    """Two cores are shared: keep torch to one intra-op thread in tests."""
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    yield
