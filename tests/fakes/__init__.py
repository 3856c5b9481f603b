"""In-process fakes used by unit tests (fault injection the real server cannot do)."""
