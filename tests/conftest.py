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


@pytest.fixture(autouse=True, scope="session")
def _sigint_not_ignored():
    """A suite started as a background job (`make test &`, `nohup`) inherits SIGINT ignored, and
    the training loops rightly leave an ignored signal ignored (train/interrupt.py): the tests
    that press Ctrl-C with os.kill would then see nothing happen. Run the suite as a foreground
    process sees it, whatever started it."""
    import signal

    old = signal.getsignal(signal.SIGINT)
    if old is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if old is signal.SIG_IGN:
        signal.signal(signal.SIGINT, old)
