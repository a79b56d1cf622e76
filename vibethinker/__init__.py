"""vibethinker: an open implementation of the VibeThinker post-training system."""

__version__ = "0.1.0"
