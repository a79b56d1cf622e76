"""Where things are, whichever folder under tests/ a test module sits in."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
FIXTURES = ROOT / "tests" / "fixtures"  # recorded corpora the tests read (jsonl / json)
