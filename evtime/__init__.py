"""evtime: put event files into event-time order the way a stream processor would."""

__version__ = "0.1.0"
