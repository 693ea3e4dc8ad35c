"""Model service: :class:`iModel`, providers, typed responses and errors."""
